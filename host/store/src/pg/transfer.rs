//! `rawko store export` and `import` on a PostgreSQL store: the same JSON lines as the SQLite
//! store's ([`crate::transfer`]), read in one snapshot and written in one transaction, so a task
//! moves between the backends with every row and id as it was.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Write};

use serde_json::{Map, json};
use tokio_postgres::IsolationLevel;

use super::PgStore;
use super::error::{PgError, PgErrorKind};
use crate::StoreError;
use crate::transfer::Cell;
use crate::transfer::{
    FORMAT, FORMAT_VERSION, LEASE_COLUMNS, Moved, TABLES, TransferError, read_export,
};

impl PgStore {
    fn damaged(&self, message: String) -> TransferError {
        TransferError::Store(StoreError::Pg(PgError::new(
            &self.label,
            PgErrorKind::Sql(message),
        )))
    }

    /// Write every task (or only `task`) to `out`, as JSON lines, from one snapshot of the store.
    pub async fn export(
        &self,
        task: Option<&str>,
        out: &mut dyn Write,
    ) -> Result<Moved, TransferError> {
        let io = |source| TransferError::Io {
            what: "writing the export",
            source,
        };
        let mut c = self.client().await?;
        let tx = c
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(|e| self.err(e))?;
        if let Some(id) = task {
            let found: bool = tx
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM rawko.tasks WHERE id = $1)",
                    &[&id],
                )
                .await
                .map_err(|e| self.err(e))?
                .get(0);
            if !found {
                return Err(TransferError::NoTask(id.to_string()));
            }
        }
        let version: i64 = tx
            .query_one("SELECT max(version) FROM rawko.schema_version", &[])
            .await
            .map_err(|e| self.err(e))?
            .get(0);
        let header = json!({"format": FORMAT, "version": FORMAT_VERSION, "schema": version});
        writeln!(out, "{header}").map_err(io)?;
        let mut moved = Moved::default();
        for table in TABLES {
            let name = table.name;
            let filter = if task.is_some() {
                format!("WHERE {} = $1", table.of_task)
            } else {
                String::new()
            };
            let sql = format!(
                "SELECT pg_catalog.row_to_json({name}.*)::text FROM rawko.{name} {filter} \
                 ORDER BY {}",
                table.order
            );
            let rows = match task {
                Some(id) => tx.query(&sql, &[&id]).await,
                None => tx.query(&sql, &[]).await,
            }
            .map_err(|e| self.err(e))?;
            for r in rows {
                let text: String = r.get(0);
                let fields: Map<String, serde_json::Value> =
                    serde_json::from_str(&text).map_err(|e| {
                        self.damaged(format!("a `{name}` row the server gave is not JSON: {e}"))
                    })?;
                let mut row = Map::new();
                for (column, value) in fields {
                    let value = match value {
                        _ if name == "tasks" && LEASE_COLUMNS.contains(&column.as_str()) => {
                            serde_json::Value::Null
                        }
                        // SQLite keeps a flag as 0 or 1; so does the export.
                        serde_json::Value::Bool(b) => i64::from(b).into(),
                        v @ (serde_json::Value::Null
                        | serde_json::Value::String(_)
                        | serde_json::Value::Number(_)) => v,
                        _ => {
                            return Err(self.damaged(format!(
                                "a value of a type rawko does not write in {name}.{column}"
                            )));
                        }
                    };
                    row.insert(column, value);
                }
                if name == "tasks"
                    && let Some(id) = row.get("id").and_then(|v| v.as_str())
                {
                    moved.tasks.push(id.to_string());
                }
                let line = json!({"table": name, "row": row});
                writeln!(out, "{line}").map_err(io)?;
                moved.rows += 1;
            }
        }
        out.flush().map_err(io)?;
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(moved)
    }

    /// Read an export from `input` into this store, in one transaction: every row with its id,
    /// or (on any error) nothing. The id sequences are moved past the ids it brought.
    pub async fn import(&self, input: &mut dyn BufRead) -> Result<Moved, TransferError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(|e| self.err(e))?;
        let mut columns_of = HashMap::new();
        for table in TABLES {
            let names: HashSet<String> = tx
                .query(
                    "SELECT attname::text FROM pg_catalog.pg_attribute \
                     WHERE attrelid = pg_catalog.to_regclass('rawko.' || $1) \
                       AND attnum > 0 AND NOT attisdropped",
                    &[&table.name],
                )
                .await
                .map_err(|e| self.err(e))?
                .iter()
                .map(|r| r.get(0))
                .collect();
            columns_of.insert(table.name, names);
        }
        let rows = read_export(input, &columns_of)?;
        let mut moved = Moved::default();
        for row in &rows {
            if let Some(id) = row.task_id() {
                let exists: bool = tx
                    .query_one(
                        "SELECT EXISTS (SELECT 1 FROM rawko.tasks WHERE id = $1)",
                        &[&id],
                    )
                    .await
                    .map_err(|e| self.err(e))?
                    .get(0);
                if exists {
                    return Err(TransferError::format(
                        row.line,
                        format!("task {id} is already in this store"),
                    ));
                }
                moved.tasks.push(id.to_string());
            }
            // The row as one JSON object, which the server casts column by column to the
            // table's own types (a flag's 0 or 1 to a boolean).
            let object: Map<String, serde_json::Value> = row
                .cols
                .iter()
                .zip(&row.vals)
                .map(|(c, v)| {
                    let v = match v {
                        Cell::Null => serde_json::Value::Null,
                        Cell::Int(n) => (*n).into(),
                        Cell::Text(t) => t.clone().into(),
                    };
                    (c.clone(), v)
                })
                .collect();
            let cols = row
                .cols
                .iter()
                .map(|c| format!("\"{c}\""))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "INSERT INTO rawko.{t} ({cols}) SELECT {cols} FROM \
                 pg_catalog.json_populate_record(NULL::rawko.{t}, $1::text::json)",
                t = row.table
            );
            let object = serde_json::Value::Object(object).to_string();
            if let Err(e) = tx.execute(&sql, &[&object]).await {
                return Err(if e.as_db_error().is_some() {
                    row.does_not_fit(&super::error::describe(&e))
                } else {
                    self.err(e).into()
                });
            }
            moved.rows += 1;
        }
        Self::advance_ids_in(&tx).await.map_err(|e| self.err(e))?;
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(moved)
    }
}
