//! What the shared SQL needs of a database driver, named once: [`SqlDb`].
//!
//! sqlx states what a driver can do as bounds on other types (`String: Encode<'_, DB>`,
//! `&mut DB::Connection: Executor`), and Rust does not carry such bounds along with a type
//! parameter: generic code would have to repeat the whole list on every function. Here each
//! bound becomes a trait *of the database* ([`Binds<T>`], [`Reads<T>`], [`Runs`]), with a
//! blanket impl wherever sqlx provides the capability, so that [`SqlDb`] can list them as
//! supertraits, which Rust does carry. The shared SQL then writes `.arg(v)` for `.bind(v)`,
//! `row.col(name)` for `row.try_get(name)`, [`query_as`] for `sqlx::query_as`, and runs a
//! statement on `tx.conn()` (a transaction's connection) or on the store's `reads()` or
//! `writes()` pool. Each is the sqlx call it
//! replaces, unchanged: the same value encoded, the same column decoded, the same error.
//!
//! A type the shared SQL starts binding or reading is added to [`SqlDb`]'s list; the compiler
//! names it when it is missing.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::marker::PhantomData;

use sqlx::query::Query;
use sqlx::types::Json;
use sqlx::{
    ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, SqlSafeStr, Type,
};

use crate::domain::{ApprovalRequest, HistoryRecord, PatternOutcome, SignalContext, StageState};

/// The database binds a `T` as a statement parameter.
pub trait Binds<T>: Database {
    fn bind_to<'q>(
        q: Query<'q, Self, Self::Arguments>,
        value: T,
    ) -> Query<'q, Self, Self::Arguments>;
}

// `'t` is the lifetime sqlx encodes `T` for: `Option<&'a str>` encodes for `'a` only.
impl<'t, DB: Database, T: Encode<'t, DB> + Type<DB> + 't> Binds<T> for DB {
    fn bind_to<'q>(
        q: Query<'q, Self, Self::Arguments>,
        value: T,
    ) -> Query<'q, Self, Self::Arguments> {
        q.bind(value)
    }
}

/// The database decodes a column into a `T`.
pub trait Reads<T>: Database {
    fn read(row: &Self::Row, column: &str) -> Result<T, sqlx::Error>;
    fn read_at(row: &Self::Row, index: usize) -> Result<T, sqlx::Error>;
}

impl<DB: Database, T: for<'r> Decode<'r, DB> + Type<DB>> Reads<T> for DB
where
    for<'a> &'a str: ColumnIndex<DB::Row>,
    usize: ColumnIndex<DB::Row>,
{
    fn read(row: &Self::Row, column: &str) -> Result<T, sqlx::Error> {
        row.try_get(column)
    }
    fn read_at(row: &Self::Row, index: usize) -> Result<T, sqlx::Error> {
        row.try_get(index)
    }
}

/// How many rows a statement changed: each driver's `rows_affected`, implemented beside its
/// dialect (sqlx has no trait for it).
pub trait RowsAffected {
    fn rows_affected(&self) -> u64;
}

/// The database runs statements on a connection (a transaction's) or a pool.
pub trait Runs: Database {
    fn on<'c>(conn: &'c mut Self::Connection) -> impl Executor<'c, Database = Self>;
    fn on_pool<'p>(pool: &'p Pool<Self>) -> impl Executor<'p, Database = Self>;
}

impl<DB: Database> Runs for DB
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    fn on<'c>(conn: &'c mut Self::Connection) -> impl Executor<'c, Database = Self> {
        conn
    }
    fn on_pool<'p>(pool: &'p Pool<Self>) -> impl Executor<'p, Database = Self> {
        pool
    }
}

/// `tx.conn()`: a transaction's connection, to run a statement on.
pub trait Conn<DB: Runs> {
    fn conn(&mut self) -> impl Executor<'_, Database = DB>;
}

impl<DB: Runs> Conn<DB> for sqlx::Transaction<'static, DB> {
    fn conn(&mut self) -> impl Executor<'_, Database = DB> {
        DB::on(&mut **self)
    }
}

/// Everything the shared SQL binds, reads and runs on. SQLite and Postgres both are.
pub trait SqlDb:
    Database<Arguments: IntoArguments<Self>, QueryResult: RowsAffected>
    + Runs
    + Binds<String>
    + for<'a> Binds<&'a str>
    + for<'a> Binds<&'a String>
    + for<'a> Binds<Option<&'a str>>
    + Binds<Option<String>>
    + for<'a> Binds<Cow<'a, str>>
    + for<'a> Binds<Option<Cow<'a, str>>>
    + Binds<i64>
    + Binds<i32>
    + Binds<bool>
    + Binds<Json<serde_json::Value>>
    + for<'a> Binds<Json<Cow<'a, serde_json::Value>>>
    + for<'a> Binds<Option<Json<Cow<'a, serde_json::Value>>>>
    + Reads<String>
    + Reads<Option<String>>
    + Reads<i64>
    + Reads<Option<i64>>
    + Reads<i32>
    + Reads<Option<bool>>
    + Reads<Json<serde_json::Value>>
    + Reads<Option<Json<serde_json::Value>>>
    + Reads<Json<BTreeMap<String, String>>>
    + Reads<Json<SignalContext>>
    + Reads<Json<StageState>>
    + Reads<Json<ApprovalRequest>>
    + Reads<Json<HistoryRecord>>
    + Reads<Json<PatternOutcome>>
{
}

impl<DB> SqlDb for DB where
    DB: Database<Arguments: IntoArguments<DB>, QueryResult: RowsAffected>
        + Runs
        + Binds<String>
        + for<'a> Binds<&'a str>
        + for<'a> Binds<&'a String>
        + for<'a> Binds<Option<&'a str>>
        + Binds<Option<String>>
        + for<'a> Binds<Cow<'a, str>>
        + for<'a> Binds<Option<Cow<'a, str>>>
        + Binds<i64>
        + Binds<i32>
        + Binds<bool>
        + Binds<Json<serde_json::Value>>
        + for<'a> Binds<Json<Cow<'a, serde_json::Value>>>
        + for<'a> Binds<Option<Json<Cow<'a, serde_json::Value>>>>
        + Reads<String>
        + Reads<Option<String>>
        + Reads<i64>
        + Reads<Option<i64>>
        + Reads<i32>
        + Reads<Option<bool>>
        + Reads<Json<serde_json::Value>>
        + Reads<Option<Json<serde_json::Value>>>
        + Reads<Json<BTreeMap<String, String>>>
        + Reads<Json<SignalContext>>
        + Reads<Json<StageState>>
        + Reads<Json<ApprovalRequest>>
        + Reads<Json<HistoryRecord>>
        + Reads<Json<PatternOutcome>>
{
}

/// `.arg(v)`: `Query::bind` through [`Binds`].
pub trait Arg<DB: Database>: Sized {
    fn arg<T>(self, value: T) -> Self
    where
        DB: Binds<T>;
}

impl<DB: Database> Arg<DB> for Query<'_, DB, DB::Arguments> {
    fn arg<T>(self, value: T) -> Self
    where
        DB: Binds<T>,
    {
        DB::bind_to(self, value)
    }
}

/// `row.col(name)`: `Row::try_get` through [`Reads`].
pub trait Col<DB: Database> {
    fn col<T>(&self, column: &str) -> Result<T, sqlx::Error>
    where
        DB: Reads<T>;
}

impl<R: Row> Col<R::Database> for R
where
    R::Database: Database<Row = R>,
{
    fn col<T>(&self, column: &str) -> Result<T, sqlx::Error>
    where
        R::Database: Reads<T>,
    {
        <R::Database as Reads<T>>::read(self, column)
    }
}

/// A row read as a tuple, column by column in order (what `sqlx::FromRow` does for tuples).
pub trait FromCols<DB: Database>: Sized {
    fn from_cols(row: &DB::Row) -> Result<Self, sqlx::Error>;
}

impl<DB: Reads<A>, A> FromCols<DB> for (A,) {
    fn from_cols(row: &DB::Row) -> Result<Self, sqlx::Error> {
        Ok((DB::read_at(row, 0)?,))
    }
}

impl<DB: Reads<A> + Reads<B>, A, B> FromCols<DB> for (A, B) {
    fn from_cols(row: &DB::Row) -> Result<Self, sqlx::Error> {
        Ok((
            <DB as Reads<A>>::read_at(row, 0)?,
            <DB as Reads<B>>::read_at(row, 1)?,
        ))
    }
}

impl<DB: Reads<A> + Reads<B> + Reads<C>, A, B, C> FromCols<DB> for (A, B, C) {
    fn from_cols(row: &DB::Row) -> Result<Self, sqlx::Error> {
        Ok((
            <DB as Reads<A>>::read_at(row, 0)?,
            <DB as Reads<B>>::read_at(row, 1)?,
            <DB as Reads<C>>::read_at(row, 2)?,
        ))
    }
}

impl<DB: Reads<A> + Reads<B> + Reads<C> + Reads<E>, A, B, C, E> FromCols<DB> for (A, B, C, E) {
    fn from_cols(row: &DB::Row) -> Result<Self, sqlx::Error> {
        Ok((
            <DB as Reads<A>>::read_at(row, 0)?,
            <DB as Reads<B>>::read_at(row, 1)?,
            <DB as Reads<C>>::read_at(row, 2)?,
            <DB as Reads<E>>::read_at(row, 3)?,
        ))
    }
}

impl<DB, A, B, C, E, F, G> FromCols<DB> for (A, B, C, E, F, G)
where
    DB: Reads<A> + Reads<B> + Reads<C> + Reads<E> + Reads<F> + Reads<G>,
{
    fn from_cols(row: &DB::Row) -> Result<Self, sqlx::Error> {
        Ok((
            <DB as Reads<A>>::read_at(row, 0)?,
            <DB as Reads<B>>::read_at(row, 1)?,
            <DB as Reads<C>>::read_at(row, 2)?,
            <DB as Reads<E>>::read_at(row, 3)?,
            <DB as Reads<F>>::read_at(row, 4)?,
            <DB as Reads<G>>::read_at(row, 5)?,
        ))
    }
}

/// `sqlx::query_as` for tuples, read through [`FromCols`].
pub fn query_as<'q, DB: SqlDb, O>(sql: impl SqlSafeStr) -> QueryAs<'q, DB, O> {
    QueryAs {
        inner: sqlx::query(sql),
        out: PhantomData,
    }
}

/// A statement whose rows are read as `O`.
pub struct QueryAs<'q, DB: Database, O> {
    inner: Query<'q, DB, DB::Arguments>,
    out: PhantomData<fn() -> O>,
}

impl<'q, DB: SqlDb, O: FromCols<DB>> QueryAs<'q, DB, O> {
    pub fn arg<T>(self, value: T) -> Self
    where
        DB: Binds<T>,
    {
        Self {
            inner: self.inner.arg(value),
            out: PhantomData,
        }
    }

    pub async fn fetch_one<'c, E>(self, executor: E) -> Result<O, sqlx::Error>
    where
        'q: 'c,
        E: Executor<'c, Database = DB>,
    {
        O::from_cols(&self.inner.fetch_one(executor).await?)
    }

    pub async fn fetch_optional<'c, E>(self, executor: E) -> Result<Option<O>, sqlx::Error>
    where
        'q: 'c,
        E: Executor<'c, Database = DB>,
    {
        self.inner
            .fetch_optional(executor)
            .await?
            .as_ref()
            .map(O::from_cols)
            .transpose()
    }

    pub async fn fetch_all<'c, E>(self, executor: E) -> Result<Vec<O>, sqlx::Error>
    where
        'q: 'c,
        E: Executor<'c, Database = DB>,
    {
        self.inner
            .fetch_all(executor)
            .await?
            .iter()
            .map(O::from_cols)
            .collect()
    }
}
