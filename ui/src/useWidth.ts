// The pixel width of an element, kept up to date (charts draw in pixels, so text keeps its size).
import { type RefObject, useEffect, useRef, useState } from "react";

export function useWidth<T extends HTMLElement>(fallback = 900): [RefObject<T | null>, number] {
  const ref = useRef<T | null>(null);
  const [width, setWidth] = useState(fallback);
  useEffect(() => {
    const element = ref.current;
    if (!element) return undefined;
    const measure = () => setWidth(Math.max(320, Math.floor(element.getBoundingClientRect().width)));
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(element);
    return () => observer.disconnect();
  }, []);
  return [ref, width];
}
