//! Moving tasks between stores: `rawko store export` writes tasks as JSON lines, and
//! `rawko store import` reads them into another store (of another machine, or another backend),
//! with every row id kept, so a task reads the same wherever it is.
//!
//! The first line is a header naming the format and the schema version of the store it came
//! from. Every other line is one row: `{"table": "...", "row": {"column": value, ...}}`, tasks
//! first, then each table whose rows refer to them, each in row-id order. Values are integers,
//! strings or null, as the schema has them.
//!
//! An import is one transaction: all of it is written, or nothing. It takes only what it can
//! place exactly: a table or column this store does not have (an export of a newer rawko), a
//! value of another type, a task or row id this store already holds, or a row that refers to a
//! task or turn the import does not bring (which would add to a task already here) is an error
//! naming the line, and nothing is written. A lease is never carried over: a runner of the store
//! the task came from holds nothing in this one.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Write};

use rusqlite::types::Value;
use serde_json::{Map, json};

use crate::schema::MIGRATIONS;
use crate::{StoreError, TaskStore};

/// The format's name, in the header line.
pub const FORMAT: &str = "rawko-tasks";
/// The format's version, in the header line.
pub const FORMAT_VERSION: i64 = 1;

/// The tables of a task, in the order they are written and read: a row refers only to rows of
/// tables before it (a turn to its parent turn, which has a lower id).
pub(crate) const TABLES: &[Table] = &[
    Table {
        name: "tasks",
        of_task: "id",
        order: "id",
    },
    Table {
        name: "turns",
        of_task: "task_id",
        order: "id",
    },
    Table {
        name: "transitions",
        of_task: "task_id",
        order: "id",
    },
    Table {
        name: "messages",
        of_task: "(SELECT task_id FROM turns WHERE turns.id = messages.turn_id)",
        order: "id",
    },
    Table {
        name: "tool_calls",
        of_task: "(SELECT task_id FROM turns WHERE turns.id = tool_calls.turn_id)",
        order: "id",
    },
    Table {
        name: "decisions",
        of_task: "task_id",
        order: "id",
    },
    Table {
        name: "usage",
        of_task: "(SELECT task_id FROM turns WHERE turns.id = usage.turn_id)",
        order: "id",
    },
    Table {
        name: "runs",
        of_task: "task_id",
        order: "id",
    },
    Table {
        name: "model_calls",
        of_task: "(SELECT task_id FROM turns WHERE turns.id = model_calls.turn_id)",
        order: "id",
    },
];

/// The lease columns of `tasks`, never carried over.
pub(crate) const LEASE_COLUMNS: &[&str] = &[
    "lease_pid",
    "lease_host",
    "lease_at",
    "lease_start",
    "lease_token",
];

pub(crate) struct Table {
    pub name: &'static str,
    /// The SQL expression of a row's task id.
    pub of_task: &'static str,
    pub order: &'static str,
}

/// How much an export or import moved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Moved {
    /// The tasks' ids, in the order they were written.
    pub tasks: Vec<String>,
    /// Rows of every table, the tasks' own included.
    pub rows: usize,
}

/// Why an export or import stopped. Nothing was written to the store in either case.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("no task {0} in this store")]
    NoTask(String),
    /// The input is not an export this rawko can place; `line` counts from 1.
    #[error("line {line}: {message}")]
    Format { line: usize, message: String },
}

impl TransferError {
    pub(crate) fn format(line: usize, message: impl Into<String>) -> Self {
        TransferError::Format {
            line,
            message: message.into(),
        }
    }
}

fn sql(e: rusqlite::Error) -> TransferError {
    TransferError::Store(StoreError::Sql(e))
}

impl TaskStore {
    /// Write every task (or only `task`) to `out`, as JSON lines, in one read transaction, so
    /// the export is one consistent moment of the store even while a run writes to it.
    pub fn export(&self, task: Option<&str>, out: &mut dyn Write) -> Result<Moved, TransferError> {
        let err = sql;
        let io = |source| TransferError::Io {
            what: "writing the export",
            source,
        };
        let tx = self.conn.unchecked_transaction().map_err(&err)?;
        if let Some(id) = task {
            let found: bool = tx
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM tasks WHERE id = ?1)",
                    [id],
                    |r| r.get(0),
                )
                .map_err(&err)?;
            if !found {
                return Err(TransferError::NoTask(id.to_string()));
            }
        }
        let version: i64 = tx
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(&err)?;
        let header = json!({"format": FORMAT, "version": FORMAT_VERSION, "schema": version});
        writeln!(out, "{header}").map_err(io)?;
        let mut moved = Moved::default();
        for table in TABLES {
            let filter = if task.is_some() {
                format!("WHERE {} = ?1", table.of_task)
            } else {
                String::new()
            };
            let mut stmt = tx
                .prepare(&format!(
                    "SELECT * FROM {} {filter} ORDER BY {}",
                    table.name, table.order
                ))
                .map_err(&err)?;
            let columns: Vec<String> = stmt.column_names().map(String::from).collect();
            let params: Vec<&str> = task.into_iter().collect();
            let mut rows = stmt
                .query(rusqlite::params_from_iter(params))
                .map_err(&err)?;
            while let Some(r) = rows.next().map_err(&err)? {
                let mut row = Map::new();
                for (i, column) in columns.iter().enumerate() {
                    let value = if table.name == "tasks" && LEASE_COLUMNS.contains(&column.as_str())
                    {
                        serde_json::Value::Null
                    } else {
                        match r.get::<_, Value>(i).map_err(&err)? {
                            Value::Null => serde_json::Value::Null,
                            Value::Integer(n) => n.into(),
                            Value::Text(s) => s.into(),
                            // rawko's schema has neither; a store holding one is not its own.
                            Value::Real(_) | Value::Blob(_) => {
                                return Err(TransferError::Store(StoreError::Foreign {
                                    path: self.path.clone(),
                                    what: format!(
                                        "a value of a type rawko does not write in {}.{column}",
                                        table.name
                                    ),
                                }));
                            }
                        }
                    };
                    row.insert(column.clone(), value);
                }
                if table.name == "tasks"
                    && let Some(id) = row.get("id").and_then(|v| v.as_str())
                {
                    moved.tasks.push(id.to_string());
                }
                let line = json!({"table": table.name, "row": row});
                writeln!(out, "{line}").map_err(io)?;
                moved.rows += 1;
            }
        }
        out.flush().map_err(io)?;
        Ok(moved)
    }

    /// Read an export from `input` into this store, in one transaction: every row with its id,
    /// or (on any error) nothing.
    pub fn import(&self, input: &mut dyn BufRead) -> Result<Moved, TransferError> {
        let err = sql;
        let tx = self.conn.unchecked_transaction().map_err(&err)?;
        let mut columns_of = HashMap::new();
        for table in TABLES {
            let mut stmt = tx
                .prepare("SELECT name FROM pragma_table_info(?1)")
                .map_err(&err)?;
            let names: HashSet<String> = stmt
                .query_map([table.name], |r| r.get(0))
                .map_err(&err)?
                .collect::<rusqlite::Result<_>>()
                .map_err(&err)?;
            columns_of.insert(table.name, names);
        }
        let rows = read_export(input, &columns_of)?;
        let mut moved = Moved::default();
        for row in &rows {
            if let Some(id) = row.task_id() {
                let exists: bool = tx
                    .query_row(
                        "SELECT EXISTS (SELECT 1 FROM tasks WHERE id = ?1)",
                        [id],
                        |r| r.get(0),
                    )
                    .map_err(&err)?;
                if exists {
                    return Err(TransferError::format(
                        row.line,
                        format!("task {id} is already in this store"),
                    ));
                }
                moved.tasks.push(id.to_string());
            }
            let vals: Vec<Value> = row
                .vals
                .iter()
                .map(|v| match v {
                    Cell::Null => Value::Null,
                    Cell::Int(n) => Value::Integer(*n),
                    Cell::Text(t) => Value::Text(t.clone()),
                })
                .collect();
            tx.execute(&row.insert("?"), rusqlite::params_from_iter(vals.iter()))
                .map_err(|e| match e {
                    rusqlite::Error::SqliteFailure(f, _)
                        if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                    {
                        row.does_not_fit(&e)
                    }
                    e => err(e),
                })?;
            moved.rows += 1;
        }
        tx.commit().map_err(&err)?;
        Ok(moved)
    }
}

/// A value of a row, as an export carries it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Null,
    Int(i64),
    Text(String),
}

/// One row of an export, checked against the store it goes into.
#[derive(Debug)]
pub(crate) struct Row {
    /// Its line in the export, counting from 1.
    pub line: usize,
    pub table: &'static str,
    pub cols: Vec<String>,
    pub vals: Vec<Cell>,
}

impl Row {
    fn get(&self, column: &str) -> Option<&Cell> {
        self.cols
            .iter()
            .position(|c| c == column)
            .map(|i| &self.vals[i])
    }

    /// The task's id, for a row of `tasks`.
    pub fn task_id(&self) -> Option<&str> {
        match (self.table, self.get("id")) {
            ("tasks", Some(Cell::Text(id))) => Some(id),
            _ => None,
        }
    }

    /// The statement that inserts the row, its values numbered after `mark` (`?` or `$`); the
    /// names are the store's own columns (checked when the row was read).
    pub fn insert(&self, mark: &str) -> String {
        format!(
            "INSERT INTO {} ({}) VALUES ({})",
            self.table,
            self.cols.join(", "),
            (1..=self.cols.len())
                .map(|i| format!("{mark}{i}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    /// The error of a row the store's constraints refused.
    pub fn does_not_fit(&self, e: &dyn std::fmt::Display) -> TransferError {
        TransferError::format(
            self.line,
            format!(
                "this `{}` row does not fit this store ({e}): its id may be taken; import into a \
                 store that does not hold these rows",
                self.table
            ),
        )
    }
}

/// Read and check an export: its header, then rows of tables this store has (`columns_of`
/// names each table's columns), in order, with values of the types rawko writes, each belonging
/// to a task the export brings and naming only turns it brings. Whether a task is already in the
/// store is for the caller to check.
pub(crate) fn read_export(
    input: &mut dyn BufRead,
    columns_of: &HashMap<&'static str, HashSet<String>>,
) -> Result<Vec<Row>, TransferError> {
    let mut tasks: HashSet<String> = HashSet::new();
    let mut turns: HashSet<i64> = HashSet::new();
    let mut rows = Vec::new();
    let mut table_at = 0;
    let mut header = false;
    let mut text = String::new();
    let mut line = 0;
    loop {
        text.clear();
        let n = input
            .read_line(&mut text)
            .map_err(|source| TransferError::Io {
                what: "reading the export",
                source,
            })?;
        if n == 0 {
            break;
        }
        line += 1;
        if text.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| TransferError::format(line, format!("not JSON: {e}")))?;
        if !header {
            check_header(&value, line)?;
            header = true;
            continue;
        }
        let (name, fields) = match (&value["table"], &value["row"]) {
            (serde_json::Value::String(t), serde_json::Value::Object(r)) => (t.as_str(), r),
            _ => {
                return Err(TransferError::format(
                    line,
                    "expected {\"table\": NAME, \"row\": {...}}",
                ));
            }
        };
        let Some(at) = TABLES.iter().position(|t| t.name == name) else {
            return Err(TransferError::format(
                line,
                format!("this store has no table `{name}`"),
            ));
        };
        if at < table_at {
            return Err(TransferError::format(
                line,
                format!(
                    "a `{name}` row after `{}` rows: the export is out of order",
                    TABLES[table_at].name
                ),
            ));
        }
        table_at = at;
        let table = TABLES[at].name;
        let known = &columns_of[table];
        let mut row = Row {
            line,
            table,
            cols: Vec::with_capacity(fields.len()),
            vals: Vec::with_capacity(fields.len()),
        };
        for (column, v) in fields {
            if !known.contains(column) {
                return Err(TransferError::format(
                    line,
                    format!(
                        "this store's `{name}` has no column `{column}` (an export of a newer rawko?)"
                    ),
                ));
            }
            let v = if name == "tasks" && LEASE_COLUMNS.contains(&column.as_str()) {
                Cell::Null
            } else {
                match v {
                    serde_json::Value::Null => Cell::Null,
                    serde_json::Value::String(s) => Cell::Text(s.clone()),
                    serde_json::Value::Number(n) if n.as_i64().is_some() => {
                        Cell::Int(n.as_i64().unwrap_or_default())
                    }
                    other => {
                        return Err(TransferError::format(
                            line,
                            format!(
                                "`{name}.{column}` is {other}: values are integers, strings or null"
                            ),
                        ));
                    }
                }
            };
            row.cols.push(column.clone());
            row.vals.push(v);
        }
        // A row belongs to a task this import brings, and so does every turn it names.
        if name == "tasks" {
            match row.get("id") {
                Some(Cell::Text(id)) => {
                    if !tasks.insert(id.clone()) {
                        return Err(TransferError::format(
                            line,
                            format!("task {id} is twice in the export"),
                        ));
                    }
                }
                _ => return Err(TransferError::format(line, "a task without an id")),
            }
        } else {
            if let Some(task) = row.get("task_id") {
                let ours = matches!(task, Cell::Text(t) if tasks.contains(t));
                if !ours {
                    return Err(TransferError::format(
                        line,
                        format!("a `{name}` row of a task this import does not bring"),
                    ));
                }
            }
            for c in ["turn_id", "parent_id"] {
                match row.get(c) {
                    None | Some(Cell::Null) if c == "parent_id" || name == "decisions" => {}
                    Some(Cell::Int(t)) if turns.contains(t) => {}
                    None if !known.contains(c) => {}
                    _ => {
                        return Err(TransferError::format(
                            line,
                            format!("a `{name}` row whose `{c}` is not a turn this import brings"),
                        ));
                    }
                }
            }
            if name == "turns" {
                match row.get("id") {
                    Some(Cell::Int(id)) => {
                        turns.insert(*id);
                    }
                    _ => return Err(TransferError::format(line, "a turn without an id")),
                }
            }
        }
        rows.push(row);
    }
    if !header {
        return Err(TransferError::format(
            line.max(1),
            "empty: an export starts with its header line",
        ));
    }
    Ok(rows)
}

pub(crate) fn check_header(value: &serde_json::Value, line: usize) -> Result<(), TransferError> {
    if value["format"] != FORMAT {
        return Err(TransferError::format(
            line,
            format!("not a rawko export (the first line names no format `{FORMAT}`)"),
        ));
    }
    match value["version"].as_i64() {
        Some(FORMAT_VERSION) => {}
        v => {
            return Err(TransferError::format(
                line,
                format!(
                    "export format version {} is not one this rawko reads ({FORMAT_VERSION})",
                    v.map_or("?".into(), |v| v.to_string())
                ),
            ));
        }
    }
    match value["schema"].as_i64() {
        Some(s) if s >= 1 && s as usize <= MIGRATIONS.len() => Ok(()),
        s => Err(TransferError::format(
            line,
            format!(
                "the export is of a store at schema version {}, and this rawko knows up to {}: \
                 import it with a newer rawko",
                s.map_or("?".into(), |v| v.to_string()),
                MIGRATIONS.len()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AuditEntry, TaskStatus, ToolCall, Transition, Usage};

    fn store(dir: &tempfile::TempDir, name: &str) -> TaskStore {
        TaskStore::open(&dir.path().join(name)).unwrap()
    }

    fn filled(s: &TaskStore) -> String {
        let task = s
            .create_task("do it", "developer", &serde_json::json!({}))
            .unwrap();
        let turn = s.start_turn(&task, "developer", None).unwrap();
        let child = s.start_turn(&task, "tester", Some(turn)).unwrap();
        s.append_message(turn, "user", &serde_json::json!({"text": "hi"}))
            .unwrap();
        s.append_reply(
            turn,
            &serde_json::json!({"text": "ok"}),
            "replay",
            "m",
            &Usage {
                input_tokens: 3,
                output_tokens: 4,
                ..Default::default()
            },
        )
        .unwrap();
        s.record_tool_call(&ToolCall {
            turn_id: child,
            call_id: "c1".into(),
            tool: "Read".into(),
            input: "{}".into(),
            output: "out".into(),
            is_error: false,
            verdict: "allow".into(),
            duration_us: 5,
            at: 0,
        })
        .unwrap();
        s.record_decision(
            &task,
            &AuditEntry {
                turn_id: Some(turn),
                subject: "tool".into(),
                capability: "fs.read".into(),
                detail: ".".into(),
                decision: "allow".into(),
                reason: "granted".into(),
                at: 0,
            },
        )
        .unwrap();
        s.transition(
            &task,
            &Transition {
                from: Some("developer".into()),
                to: "tester".into(),
                event: "onSuccess".into(),
                mode: "table".into(),
                reason: "done".into(),
                at: 0,
            },
            TaskStatus::Running,
        )
        .unwrap();
        s.end_turn(child, "success", "fine", None).unwrap();
        let run = s
            .start_run(
                &task,
                Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
            )
            .unwrap();
        s.record_model_call(&crate::ModelCall {
            turn_id: turn,
            adapter: "replay".into(),
            model: "m".into(),
            response_model: Some("m-1".into()),
            finish_reason: Some("tool_use".into()),
            attempt: 0,
            outcome: "ok".into(),
            started_at: 1,
            ended_at: 2,
        })
        .unwrap();
        s.end_run(&task, run, "done").unwrap();
        s.finish_task(&task, TaskStatus::Done, "done").unwrap();
        task
    }

    fn export(s: &TaskStore, task: Option<&str>) -> String {
        let mut out = Vec::new();
        s.export(task, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_round_trip_keeps_every_row_and_id() {
        let dir = tempfile::tempdir().unwrap();
        let a = store(&dir, "a.db");
        let first = filled(&a);
        let second = filled(&a);
        let text = export(&a, None);
        let b = store(&dir, "b.db");
        let moved = b.import(&mut text.as_bytes()).unwrap();
        let mut both = [first.clone(), second.clone()];
        both.sort();
        assert_eq!(moved.tasks, both);
        assert_eq!(moved.rows, text.lines().count() - 1);
        assert_eq!(export(&b, None), text);
        let of = |s: &TaskStore, t: &str| {
            serde_json::json!([
                s.task(t).unwrap(),
                s.transitions(t).unwrap(),
                s.turns(t).unwrap(),
                s.tool_calls(t).unwrap(),
                s.decisions(t).unwrap(),
                s.task_usage(t).unwrap(),
                s.runs(t).unwrap(),
                s.model_calls(t).unwrap(),
            ])
        };
        for t in [&first, &second] {
            assert_eq!(of(&a, t), of(&b, t));
        }
        // One task alone moves with its rows only.
        let one = export(&a, Some(&second));
        let c = store(&dir, "c.db");
        assert_eq!(
            c.import(&mut one.as_bytes()).unwrap().tasks,
            std::slice::from_ref(&second)
        );
        assert_eq!(export(&c, None), one);
        assert!(matches!(
            a.export(Some("nope"), &mut Vec::new()),
            Err(TransferError::NoTask(_))
        ));
    }

    #[test]
    fn a_lease_is_not_carried_over() {
        let dir = tempfile::tempdir().unwrap();
        let a = store(&dir, "a.db");
        let task = a
            .create_task("p", "developer", &serde_json::json!({}))
            .unwrap();
        a.acquire_lease(&task).unwrap().unwrap();
        let text = export(&a, None);
        assert!(!text.contains(&format!("\"lease_pid\":{}", std::process::id())));
        let b = store(&dir, "b.db");
        b.import(&mut text.as_bytes()).unwrap();
        // Not held by anyone in b: this process takes it at once.
        b.acquire_lease(&task).unwrap().unwrap();
    }

    /// What cannot be placed exactly is refused, naming the line, and nothing is written.
    #[test]
    fn a_bad_export_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let a = store(&dir, "a.db");
        let task = filled(&a);
        let good = export(&a, None);
        let lines: Vec<&str> = good.lines().collect();
        let with = |i: usize, replace: &str| {
            let mut l = lines.clone();
            l[i] = replace;
            l.join("\n")
        };
        let turn_line = lines
            .iter()
            .position(|l| l.contains("\"table\":\"messages\""))
            .unwrap();
        let cases: Vec<(String, &str)> = vec![
            (String::new(), "empty"),
            ("{}".into(), "not a rawko export"),
            (
                with(0, r#"{"format":"rawko-tasks","version":1,"schema":99}"#),
                "import it with a newer rawko",
            ),
            (
                with(0, r#"{"format":"rawko-tasks","version":2,"schema":1}"#),
                "format version 2",
            ),
            (
                format!("{}\n{{\"table\":\"secrets\",\"row\":{{}}}}", lines[0]),
                "no table `secrets`",
            ),
            (
                lines[..2].join("\n").replace("\"prompt\"", "\"evil\""),
                "no column `evil`",
            ),
            (
                lines[..2]
                    .join("\n")
                    .replace("\"prompt\":\"do it\"", "\"prompt\":1.5"),
                "values are integers, strings or null",
            ),
            // Rows that would join a task already in the store.
            (
                format!("{}\n{}", lines[0], lines[turn_line]),
                "not a turn this import brings",
            ),
            (good.clone(), "already in this store"),
        ];
        let b = store(&dir, "b.db");
        b.import(&mut good.as_bytes()).unwrap();
        for (text, want) in cases {
            let target = store(&dir, "b.db");
            let before = export(&target, None);
            let e = target.import(&mut text.as_bytes()).unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
            assert_eq!(export(&target, None), before, "{want}");
        }
        // A fresh store refuses a task whose later row breaks, and keeps nothing of it.
        let c = store(&dir, "c.db");
        let broken = with(lines.len() - 1, r#"{"table":"usage","row":{"id":"x"}}"#);
        assert!(c.import(&mut broken.as_bytes()).is_err());
        assert!(c.tasks().unwrap().is_empty());
        assert!(c.task(&task).is_err());
    }
}
