// The frame of every page: a heading, what it shows, when it was read and whether it still refreshes.
import { Alert, Box, Heading, HStack, Spinner, Text } from "@chakra-ui/react";
import type { ReactNode } from "react";

import type { Polled } from "./api";
import { formatTime } from "./format";

type Props<T> = { title: string; subtitle?: string; polled: Polled<T>; children: (data: T) => ReactNode;
                  stoppedText?: (data: T) => string };

export function Frame<T>({ title, subtitle, polled, children, stoppedText }: Props<T>) {
  const { data, error, updatedAt, polling } = polled;
  let status = "loading ...";
  if (updatedAt !== undefined) {
    status = `updated ${formatTime(updatedAt / 1000)}`;
    if (!polling && data !== undefined && stoppedText) status = stoppedText(data);
  }
  return (
    <Box className="regionflow-page" p={2}>
      <HStack justify="space-between" mb={2} wrap="wrap">
        <Box>
          <Heading size="lg">{title}</Heading>
          {subtitle ? <Text color="fg.muted" fontSize="sm">{subtitle}</Text> : null}
        </Box>
        <Text id="status" color="fg.muted" fontSize="sm">{status}</Text>
      </HStack>
      {error ? (
        <Alert.Root status="error" mb={3} id="error">
          <Alert.Indicator />
          <Alert.Title>{error}</Alert.Title>
        </Alert.Root>
      ) : null}
      {data === undefined ? (error ? null : <Spinner />) : children(data)}
    </Box>
  );
}

export function Section({ title, children, id }: { title: string; children: ReactNode; id?: string }) {
  return (
    <Box as="section" mt={5} data-section={id}>
      <Heading size="md" mb={2}>{title}</Heading>
      {children}
    </Box>
  );
}
