//! What PostgreSQL's and MariaDB's stores share: their servers ([`Servers`]: the primary's
//! pool, the replicas behind it, where each read goes) and the ways to build a store over
//! them ([`Networked`]), written once for both.
//!
//! Its parts: the ways to build a store (`build`, beside `Servers`' private fields), the
//! host search (`hosts`), what a host is asked and says (`roles`), the replicas
//! (`replicas`) and URL parsing (`url`).

mod build;
mod hosts;
pub(crate) mod replicas;
mod roles;
mod url;

use std::sync::Arc;

use books_core::store::{SharedCheck, StoreError, Unready};
use metrics::counter;
use sqlx::pool::PoolOptions;
use sqlx::{Connection, Pool};

use self::hosts::Hosts;
pub use self::hosts::{PROBE_TIMEOUT, RETRY_AFTER};
use self::replicas::{ReplicaState, Replicas, Standby};
pub use self::roles::{Role, SessionAttrs};
use crate::backend::{Backend, PoolState, Read, ServerSet, SqlStore};
use crate::check::{Generation, OnConnection};
use crate::driver::Driver;
use crate::error::{OrStoreError, PrimaryError};
use crate::statement::{Arg, Statement};
use crate::{ACQUIRE_TIMEOUT, Error, PRIMARY_TIMEOUT};

/// The options a database's connections are opened with.
pub type ConnectOptionsOf<DB> = <<DB as sqlx::Database>::Connection as Connection>::Options;

/// A database whose store reaches it over the network: a primary, perhaps replicas. Sealed
/// (PostgreSQL and MariaDB).
pub trait Networked: Backend<Servers = Servers<Self>> + Standby {
    /// The pools' name in metrics (`postgres`, `mysql`).
    const POOL_NAME: &'static str;

    /// The database system as OpenTelemetry names it (`db.system.name`: `postgresql`,
    /// `mariadb`), recorded on the core's store spans.
    const SYSTEM: &'static str;

    /// The options for one host's `url`.
    fn parse(url: &str) -> Result<ConnectOptionsOf<Self>, Error>;

    /// Where `options` connect, as logs and errors name a host (`host:port`, or the
    /// socket's path).
    fn address(options: &ConnectOptionsOf<Self>) -> String;

    /// What a statement starts with that must not wait for the cluster (MariaDB:
    /// `SET STATEMENT wsrep_sync_wait = 0 FOR `, no causality wait on Galera).
    const NO_WAIT: &'static str;

    /// What the server on `conn` says of its role, without waiting for the cluster.
    fn role(conn: &mut Self::Connection) -> impl Future<Output = Result<Role, sqlx::Error>> + Send;

    /// Whether `error` says the primary's server is gone or no longer the primary (the
    /// connection refused, reset or ended by the server, a read-only transaction, a
    /// server shutting down or not ready): the pool looks for it again.
    fn lost(error: &sqlx::Error) -> bool;

    /// The options of the store's own pools: no ping before each checkout (a round trip
    /// per request: a connection that died fails its query once, 503, and is dropped),
    /// the store's session settings on each connection it opens.
    fn pool_options(extra: &Self::Extra) -> PoolOptions<Self>;
}

/// A store's servers: the primary's pool (and the hosts it may connect to, for a pool of
/// the store's own), and the replicas behind it.
#[derive(Debug)]
pub struct Servers<DB: Standby> {
    pub(crate) pool: Pool<DB>,
    /// Whether the store built the pool (its version check then has a connection of its
    /// own).
    pub(crate) own: bool,
    /// The hosts the pool may connect to (none for a host's pool).
    hosts: Option<Arc<Hosts<DB>>>,
    replicas: Option<Arc<Replicas<DB>>>,
    /// The primary's position for reads from replicas, read once for every read that
    /// asked before it was sent.
    positions: Arc<SharedCheck<Option<DB::Position>>>,
}

impl<DB: Standby> Clone for Servers<DB> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            own: self.own,
            hosts: self.hosts.clone(),
            replicas: self.replicas.clone(),
            positions: self.positions.clone(),
        }
    }
}

impl<DB: Networked> Servers<DB> {
    /// A host's pool.
    fn new(pool: Pool<DB>) -> Self {
        Self {
            pool,
            own: false,
            hosts: None,
            replicas: None,
            positions: Arc::default(),
        }
    }

    /// A pool of the store's own over `hosts`, which drops the connections opened before
    /// its host failed or was left, before they are used again and as they come back
    /// (without the ping sqlx sends a connection coming back, which a dead network path
    /// would hold for minutes).
    fn own(hosts: Hosts<DB>, extra: &DB::Extra) -> Self {
        let hosts = Arc::new(hosts);
        let (acquiring, releasing) = (hosts.clone(), hosts.clone());
        let pool = DB::pool_options(extra)
            .before_acquire(move |_, meta| {
                let current = acquiring.current(meta.age);
                Box::pin(async move { Ok(current) })
            })
            .after_release(move |_, meta| {
                let current = releasing.current(meta.age);
                Box::pin(async move { Ok(current) })
            })
            .connect_lazy_with(hosts.first());
        Self {
            own: true,
            hosts: Some(hosts),
            ..Self::new(pool)
        }
    }

    /// Whether the primary answers and has the role the store wants (a server that lost it
    /// sends the next request looking for another), and the store's tables are there:
    /// two statements that read no row and wait for nothing (on Galera, not for the
    /// cluster's causality: a node evicting another still answers that it is ready).
    pub(crate) async fn ready(store: &SqlStore<DB>) -> Result<(), StoreError> {
        let servers = &store.servers;
        let seen = servers.hosts.as_ref().map(|hosts| hosts.generation().now());
        let role = servers.primary(async {
            let mut conn = servers.pool.acquire().await.or_store_error()?;
            let role = DB::role(&mut conn).await.or_store_error()?;
            let prefix = store.prefix();
            let tables = format!("{}SELECT 1 FROM {prefix}authors LIMIT 0", DB::NO_WAIT);
            DB::text_rows(&mut conn, tables).await.or_store_error()?;
            Ok::<_, StoreError>(role)
        });
        let attrs = servers
            .hosts
            .as_ref()
            .map_or(SessionAttrs::default(), |h| h.attrs());
        if !attrs.takes(role.await?, true) {
            if let (Some(hosts), Some(seen)) = (&servers.hosts, seen) {
                hosts.lost(seen);
            }
            return Err(StoreError::unavailable(Unready::WrongRole(attrs.name())));
        }
        Ok(())
    }

    /// The switches of the pool's host, for the version check's own connection.
    pub(crate) fn generation(&self) -> Option<Arc<Generation>> {
        self.hosts.as_ref().map(|hosts| hosts.generation())
    }

    /// Runs `work` on the primary pool: once its host is known to have the role (at
    /// once while it is; a request that finds it lost waits for a search, at most
    /// briefly, or is refused at once after one that found none), the wait and the work
    /// within [`PRIMARY_TIMEOUT`]. A failure that says the host is gone or of another
    /// role, or no answer in time, sends the next request looking for it; no pooled
    /// connection in time has the host asked its role.
    pub(crate) async fn primary<T, E: PrimaryError>(
        &self,
        work: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        self.on_host(work, Some(PRIMARY_TIMEOUT)).await
    }

    /// [`primary`](Self::primary), bounded by `bound`, or not at all for work that bounds
    /// itself (the version check, on its own connection: `CHECK_TIMEOUT`, whose timing
    /// out is a lost host too).
    async fn on_host<T, E: PrimaryError>(
        &self,
        work: impl Future<Output = Result<T, E>>,
        bound: Option<std::time::Duration>,
    ) -> Result<T, E> {
        let Some(hosts) = &self.hosts else {
            // A host's pool: its own settings bound it.
            let outcome = work.await;
            books_core::trace::store_answered_by(DB::SYSTEM, "primary", None);
            return outcome;
        };
        // Pinned where it is: the attempt (and its timer) hold a reference, not a copy.
        // Moved into them, the version check's future was copied on every check (6% of
        // a cached page's instructions on PostgreSQL, `load.py --instructions`).
        let mut work = std::pin::pin!(work);
        // The wait for a search counts in the bound: a request is answered within it. A
        // failure counts against the host the work began on (`seen`), not one found since.
        let mut seen = None;
        let attempt = async {
            seen = Some(hosts.ready(&self.pool).await?);
            Ok::<_, Unready>(work.as_mut().await)
        };
        let attempted = match bound {
            Some(bound) => match tokio::time::timeout(bound, attempt).await {
                Ok(attempted) => attempted,
                Err(_) => {
                    if let Some(seen) = seen {
                        hosts.lost(seen);
                    }
                    return Err(E::timed_out());
                }
            },
            None => attempt.await,
        };
        let outcome = attempted.map_err(E::unready)?;
        books_core::trace::store_answered_by(DB::SYSTEM, "primary", hosts.current_server());
        if let (Err(error), Some(seen)) = (&outcome, seen) {
            match error.driver() {
                Some(error) if DB::lost(error) => hosts.lost(seen),
                Some(sqlx::Error::PoolTimedOut) => hosts.check(seen),
                _ => {}
            }
        }
        outcome
    }

    /// Runs a read: data reads on a replica that has caught up with the primary as the
    /// read began (else the primary: `primary`), anything else on the primary.
    pub(crate) async fn read<F, Fut>(
        store: &SqlStore<DB>,
        to: Read,
        statement: &Statement,
        args: &[Arg<'_>],
        primary: F,
    ) -> Result<Vec<DB::Row>, StoreError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<DB::Row>, StoreError>>,
    {
        let servers = &store.servers;
        if to == Read::Primary {
            return servers.primary(primary()).await;
        }
        let primary = || {
            counter!("books_store_reads_total", "pool" => "primary").increment(1);
            servers.primary(primary())
        };
        let Some(replicas) = &servers.replicas else {
            return primary().await;
        };
        let position = servers
            .positions
            .read(|| {
                let (check, servers) = (store.check.clone(), servers.clone());
                async move {
                    let position = check.run(&servers.pool, primary_position::<DB>());
                    servers.primary(position).await
                }
            })
            .await
            .map_err(crate::error::shared)?;
        // No position (MariaDB without a binary log): nothing tells how far a replica is.
        let Some(position) = position else {
            return primary().await;
        };
        let text = statement.inline(args).or_store_error()?;
        match replicas.read(&position, &text).await {
            Ok(rows) => {
                counter!("books_store_reads_total", "pool" => "replica").increment(1);
                books_core::trace::store_answered_by(DB::SYSTEM, "replica", None);
                Ok(rows)
            }
            Err(_) => primary().await,
        }
    }
}

impl<DB: Networked> ServerSet<DB> for Servers<DB> {
    fn check_pool(&self) -> &Pool<DB> {
        &self.pool
    }

    async fn close(&self) {
        self.pool.close().await;
    }

    /// The version check bounds itself (`CHECK_TIMEOUT`, on its own connection): a
    /// second timer around it would cost every check and never fire first.
    fn on_primary<T: Send>(
        &self,
        work: impl Future<Output = Result<T, StoreError>> + Send,
    ) -> impl Future<Output = Result<T, StoreError>> + Send {
        self.on_host(
            work,
            if self.own {
                None
            } else {
                Some(PRIMARY_TIMEOUT)
            },
        )
    }

    /// The primary's pool, its replicas' pools, as metrics show them.
    fn pools(&self) -> Vec<PoolState> {
        let mut pools = vec![PoolState::of(DB::POOL_NAME.to_owned(), &self.pool)];
        for (pool, state) in self.replica_pools().iter().zip(self.replica_states()) {
            let name = format!("{}_replica:{}", DB::POOL_NAME, state.replica);
            pools.push(PoolState::of(name, pool));
        }
        pools
    }
}

impl<DB: Networked> Servers<DB> {
    fn replica_pools(&self) -> Vec<Pool<DB>> {
        self.replicas
            .as_ref()
            .map(|replicas| replicas.pools())
            .unwrap_or_default()
    }

    fn replica_states(&self) -> Vec<ReplicaState> {
        self.replicas
            .as_ref()
            .map(|replicas| replicas.states())
            .unwrap_or_default()
    }
}

/// The primary's position, read now on the version check's connection: what a replica
/// must have applied before it may answer a read.
fn primary_position<DB: Networked>() -> OnConnection<Option<DB::Position>, DB> {
    Box::new(|conn| {
        Box::pin(async move {
            let rows = DB::text_rows(conn, DB::PRIMARY_POSITION.to_owned()).await?;
            let row = rows.first().ok_or(sqlx::Error::RowNotFound)?;
            DB::applied(row)
        })
    })
}

/// The pool options every store's own pools start from.
pub(crate) fn base_pool_options<DB: Driver>() -> PoolOptions<DB> {
    PoolOptions::new()
        .max_connections(10)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .test_before_acquire(false)
}
