// Builds regionflow's pages as one UMD bundle that Airflow's UI loads for the plugin's `react_apps`
// (see provider/regionflow/ui/plugin.py). React, React DOM, the JSX runtime, Chakra UI and Emotion are
// not bundled: Airflow's UI puts its own on globalThis (React, ReactDOM, ReactJSXRuntime, ChakraUI,
// EmotionReact) for plugins, so the pages render in Airflow's React tree with Airflow's theme.
import { resolve } from "node:path";
import { defineConfig } from "vite";

const GLOBALS: Record<string, string> = {
  react: "React",
  "react-dom": "ReactDOM",
  "react/jsx-runtime": "ReactJSXRuntime",
  "@chakra-ui/react": "ChakraUI",
  "@emotion/react": "EmotionReact",
};

export default defineConfig({
  esbuild: { jsx: "automatic", legalComments: "none" },
  build: {
    outDir: resolve(__dirname, "../provider/regionflow/ui/static"),
    emptyOutDir: true,
    target: "es2020",
    minify: "esbuild",
    sourcemap: false,
    reportCompressedSize: false,
    lib: {
      entry: resolve(__dirname, "src/main.tsx"),
      formats: ["umd"],
      name: "AirflowPlugin",
      fileName: () => "regionflow.js",
    },
    rollupOptions: {
      external: Object.keys(GLOBALS),
      output: { globals: GLOBALS },
    },
  },
});
