//! What the index knows of each file, read for the check before every query: the paths of a
//! table in one string (no allocation per row), sorted by bytes as SQLite orders them, each
//! with a value.

use rusqlite::types::Type;
use rusqlite::{Connection, Row};

pub(super) struct Stored<T> {
    /// Every path, one after another.
    text: String,
    /// Where each path ends in `text`.
    ends: Vec<u32>,
    pub(super) values: Vec<T>,
}

impl<T> Stored<T> {
    /// The rows of `sql`, which selects the path first and orders by it; `value` makes the rest
    /// of a row.
    pub(super) fn read(
        conn: &Connection,
        sql: &str,
        mut value: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<Stored<T>> {
        let mut stmt = conn.prepare_cached(sql)?;
        let mut rows = stmt.query([])?;
        let mut out = Stored {
            text: String::new(),
            ends: Vec::new(),
            values: Vec::new(),
        };
        while let Some(row) = rows.next()? {
            let path = row
                .get_ref(0)?
                .as_str()
                .map_err(|e| rusqlite::Error::FromSqlConversionFailure(0, Type::Text, e.into()))?;
            out.text.push_str(path);
            let end = u32::try_from(out.text.len()).map_err(|_| rusqlite::Error::InvalidQuery)?;
            out.ends.push(end);
            out.values.push(value(row)?);
        }
        if !out.is_sorted() {
            // Not as SQLite orders text: a searched list must be sorted.
            out = out.sorted();
        }
        Ok(out)
    }

    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(super) fn path(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    pub(super) fn paths(&self) -> impl Iterator<Item = &str> {
        (0..self.len()).map(|i| self.path(i))
    }

    /// Where `rel` is.
    pub(super) fn find(&self, rel: &str) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.path(mid).cmp(rel) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// Where `rel` is, for paths asked in ascending order: `at` only moves forward, so a whole
    /// sorted listing is matched in one pass.
    pub(super) fn seek(&self, at: &mut usize, rel: &str) -> Option<usize> {
        while *at < self.len() && self.path(*at) < rel {
            *at += 1;
        }
        (*at < self.len() && self.path(*at) == rel).then_some(*at)
    }

    fn is_sorted(&self) -> bool {
        (1..self.len()).all(|i| self.path(i - 1) < self.path(i))
    }

    /// The same rows sorted by path, one of each path kept.
    fn sorted(self) -> Stored<T> {
        let mut order: Vec<usize> = (0..self.len()).collect();
        order.sort_by(|&a, &b| self.path(a).cmp(self.path(b)));
        order.dedup_by(|a, b| self.path(*a) == self.path(*b));
        let mut values: Vec<Option<T>> = self.values.into_iter().map(Some).collect();
        let mut out = Stored {
            text: String::with_capacity(self.text.len()),
            ends: Vec::with_capacity(order.len()),
            values: Vec::with_capacity(order.len()),
        };
        for i in order {
            let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
            out.text.push_str(&self.text[start..self.ends[i] as usize]);
            out.ends.push(out.text.len() as u32);
            out.values.extend(values[i].take());
        }
        out
    }
}

/// The paths of both, sorted, each once.
pub(super) fn merged<'a, A, B>(a: &'a Stored<A>, b: &'a Stored<B>) -> Vec<&'a str> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.paths().peekable(), b.paths().peekable());
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if x < y => a.next(),
            (Some(x), Some(y)) if x > y => b.next(),
            (Some(_), Some(_)) => {
                b.next();
                a.next()
            }
            (Some(_), None) => a.next(),
            (None, _) => b.next(),
        };
        match next {
            Some(p) => out.push(p),
            None => return out,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(paths: &[&str]) -> Stored<usize> {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t(path TEXT, n INTEGER)")
            .unwrap();
        for (n, p) in paths.iter().enumerate() {
            conn.execute(
                "INSERT INTO t VALUES (?1, ?2)",
                rusqlite::params![p, n as i64],
            )
            .unwrap();
        }
        Stored::read(&conn, "SELECT path, n FROM t ORDER BY path", |r| {
            Ok(r.get::<_, i64>(1)? as usize)
        })
        .unwrap()
    }

    #[test]
    fn paths_are_kept_in_byte_order_and_found_by_search_and_by_seeking() {
        let s = stored(&["b/x.rs", "a.rs", "a/b.rs", "é.md", "Z.md"]);
        let paths: Vec<&str> = s.paths().collect();
        assert_eq!(paths, ["Z.md", "a.rs", "a/b.rs", "b/x.rs", "é.md"]);
        assert_eq!(s.values, [4, 1, 2, 0, 3]);
        for (i, p) in paths.iter().enumerate() {
            assert_eq!(s.find(p), Some(i));
        }
        assert_eq!(s.find("a"), None);
        let mut at = 0;
        assert_eq!(s.seek(&mut at, "a.rs"), Some(1));
        assert_eq!(s.seek(&mut at, "a/a.rs"), None);
        assert_eq!(s.seek(&mut at, "b/x.rs"), Some(3));
        // Bytes decide: `é` comes after every ASCII letter.
        assert_eq!(s.seek(&mut at, "zz"), None);
        assert_eq!(at, 4);
        assert_eq!(s.seek(&mut at, "ö"), None);
        assert_eq!(at, 5);
    }

    #[test]
    fn rows_out_of_order_are_sorted_and_listings_merged_once_each() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE t(path TEXT); INSERT INTO t VALUES ('c'), ('a'), ('b'), ('a');",
        )
        .unwrap();
        let s = Stored::read(&conn, "SELECT path FROM t", |_| Ok(())).unwrap();
        assert_eq!(s.paths().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(s.values.len(), 3);
        let other = stored(&["b", "d", "0"]);
        assert_eq!(merged(&s, &other), ["0", "a", "b", "c", "d"]);
        assert!(merged(&stored(&[]), &stored(&[])).is_empty());
    }
}
