// A table in Airflow's look (Chakra's Table) whose columns sort on a click of their header.
import { Box, Table, Text } from "@chakra-ui/react";
import { type ReactNode, useMemo, useState } from "react";

export type Column<T> = {
  title: string;
  /** What the column sorts by (and shows, without `render`). */
  value: (row: T) => string | number | boolean | null | undefined;
  render?: (row: T) => ReactNode;
  numeric?: boolean;
};

type Props<T> = { id: string; columns: Column<T>[]; rows: T[]; empty?: string };

const compare = (a: unknown, b: unknown): number => {
  if (a === b) return 0;
  if (a === null || a === undefined || a === "") return 1;
  if (b === null || b === undefined || b === "") return -1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
};

export function SortableTable<T>({ id, columns, rows, empty = "none" }: Props<T>) {
  const [sort, setSort] = useState<{ column: number; descending: boolean } | null>(null);
  const sorted = useMemo(() => {
    if (sort === null) return rows;
    const by = columns[sort.column].value;
    const copy = [...rows].sort((a, b) => compare(by(a), by(b)));
    return sort.descending ? copy.reverse() : copy;
  }, [rows, columns, sort]);

  if (!rows.length) {
    return <Box id={id}><Text color="fg.muted" fontSize="sm">{empty}</Text></Box>;
  }
  const toggle = (column: number) =>
    setSort((old) => (old?.column === column ? { column, descending: !old.descending } : { column, descending: false }));
  return (
    <Box id={id} overflowX="auto" borderWidth="1px" borderRadius="md">
      <Table.Root size="sm" striped>
        <Table.Header>
          <Table.Row>
            {columns.map((column, index) => (
              <Table.ColumnHeader
                key={column.title}
                aria-sort={sort?.column === index ? (sort.descending ? "descending" : "ascending") : "none"}
                cursor="pointer"
                onClick={() => toggle(index)}
                textAlign={column.numeric ? "end" : "start"}
                userSelect="none"
                whiteSpace="nowrap"
              >
                {column.title}
                {sort?.column === index ? (sort.descending ? " ▼" : " ▲") : ""}
              </Table.ColumnHeader>
            ))}
          </Table.Row>
        </Table.Header>
        <Table.Body>
          {sorted.map((row, index) => (
            <Table.Row key={index}>
              {columns.map((column) => {
                const value = column.value(row);
                return (
                  <Table.Cell key={column.title} textAlign={column.numeric ? "end" : "start"}>
                    {column.render ? column.render(row) : value === null || value === undefined ? "" : String(value)}
                  </Table.Cell>
                );
              })}
            </Table.Row>
          ))}
        </Table.Body>
      </Table.Root>
    </Box>
  );
}
