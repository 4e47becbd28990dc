//! What PostgreSQL's and MariaDB's stores share: their servers ([`Servers`]: the primary's
//! pool, the replicas behind it, where each read goes) and the ways to build a store over
//! them ([`Networked`]), written once for both.
//!
//! It runs a little over 400 lines and stays one module: `Servers`' routing and the
//! builders share its private fields. The parts that stand alone already have their own
//! modules: the host search (`hosts`), what a host is asked and says (`roles`), the
//! replicas (`replicas`) and URL parsing (`url`).

mod hosts;
pub(crate) mod replicas;
mod roles;
mod url;

use std::sync::Arc;
use std::time::Duration;

use books_core::store::{SharedCheck, StoreError, Unready};
use metrics::counter;
use sqlx::pool::PoolOptions;
use sqlx::{Connection, Pool};

use self::hosts::Hosts;
pub use self::hosts::{PROBE_TIMEOUT, RETRY_AFTER};
use self::replicas::{DEFAULT_WAIT, ReplicaState, Replicas, Standby};
pub use self::roles::{Role, SessionAttrs};
use crate::backend::Read;
use crate::backend::{Backend, ServerSet};
use crate::backend::{PoolState, SqlStore};
use crate::check::Generation;
use crate::check::OnConnection;
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
            if let Some(hosts) = &servers.hosts {
                hosts.lost();
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
    /// briefly, or is refused at once after one that found none), and within
    /// [`PRIMARY_TIMEOUT`]. A failure that says the host is gone or of another role, or
    /// no answer in time, sends the next request looking for it.
    pub(crate) async fn primary<T, E: PrimaryError>(
        &self,
        work: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let Some(hosts) = &self.hosts else {
            // A host's pool: its own settings bound it.
            let outcome = work.await;
            books_core::trace::store_answered_by(DB::SYSTEM, "primary", None);
            return outcome;
        };
        hosts.ready(&self.pool).await.map_err(E::unready)?;
        let Ok(outcome) = tokio::time::timeout(PRIMARY_TIMEOUT, work).await else {
            hosts.lost();
            return Err(E::timed_out());
        };
        books_core::trace::store_answered_by(DB::SYSTEM, "primary", hosts.current_server());
        if let Err(error) = &outcome
            && error.driver().is_some_and(DB::lost)
        {
            hosts.lost();
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

    fn on_primary<T: Send>(
        &self,
        work: impl Future<Output = Result<T, StoreError>> + Send,
    ) -> impl Future<Output = Result<T, StoreError>> + Send {
        self.primary(work)
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

/// Building a PostgreSQL or MariaDB store, and its replicas.
impl<DB: Networked> SqlStore<DB> {
    /// The options for `url`, a URL of one host: see the database's store
    /// ([`PostgresStore`](crate::PostgresStore), [`MySqlStore`](crate::MySqlStore)).
    pub fn options(url: &str) -> Result<ConnectOptionsOf<DB>, Error> {
        match url::split(url)? {
            (hosts, None) if hosts.len() == 1 => DB::parse(&hosts[0]),
            _ => Err(Error::InvalidUrl(
                "several hosts or target_session_attrs: a store follows them (connect_lazy)".into(),
            )),
        }
    }

    /// Connects to `url` (one host, or several: see [`connect_lazy`](Self::connect_lazy)),
    /// failing if no server has the role it wants.
    pub async fn connect(url: &str) -> Result<Self, Error> {
        Self::connected(Self::connect_lazy(url)?).await
    }

    /// Connects with explicit options, failing if the server is down or read-only.
    pub async fn connect_with(options: ConnectOptionsOf<DB>) -> Result<Self, Error> {
        Self::connected(Self::connect_lazy_with(options)).await
    }

    /// `store` once its primary answers.
    async fn connected(store: Self) -> Result<Self, Error> {
        store.wait_for_primary(Duration::ZERO).await?;
        Ok(store)
    }

    /// Waits until a host with the role the store wants answers (one search, and more
    /// until `within` has passed), so that what runs next — migrations, demo data, a
    /// server's first request — runs on the primary whichever host of the URL it is.
    /// Fails naming what each host was found to be (refused the connection, did not
    /// answer in time, refused the login, a standby, read-only …). A store over a host's
    /// pool has nothing to look for.
    pub async fn wait_for_primary(&self, within: Duration) -> Result<(), Error> {
        let Some(hosts) = &self.servers.hosts else {
            return Ok(());
        };
        let deadline = std::time::Instant::now().checked_add(within);
        loop {
            match hosts.ready(&self.servers.pool).await {
                Ok(()) => return Ok(()),
                Err(why) if deadline.is_none_or(|d| std::time::Instant::now() >= d) => {
                    return Err(Error::NoPrimary {
                        wanted: hosts.attrs().name(),
                        why,
                        hosts: hosts.report(),
                    });
                }
                Err(_) => tokio::time::sleep(RETRY_AFTER).await,
            }
        }
    }

    /// A store for `url`; connects on first use: a store built while its server is down
    /// answers "unavailable" (503) and recovers by itself once the server is back.
    ///
    /// `url` may name several hosts as libpq does (`postgres://u@h1:5432,h2:5432/db`,
    /// or `?host=h1,h2&port=5432,5433`; `mysql://u@n1:3306,n2:3306/db` alike), with
    /// PostgreSQL's `target_session_attrs` (`any`, `read-write`, `read-only`, `primary`,
    /// `standby`, `prefer-standby`; default `read-write`): the primary pool connects to
    /// the first host, in order, whose server has that role (on MariaDB: takes writes,
    /// and on Galera is `Synced`), and looks again whenever its server fails or turns
    /// out to have another role (a failover), without a restart. Meanwhile requests get
    /// "unavailable" (503) at once, never the pool's connect timeout.
    pub fn connect_lazy(url: &str) -> Result<Self, Error> {
        let (urls, attrs) = url::split(url)?;
        let hosts = urls
            .iter()
            .map(|url| DB::parse(url))
            .collect::<Result<_, _>>()?;
        let extra = DB::Extra::default();
        let servers = Servers::own(Hosts::new(hosts, attrs.unwrap_or_default()), &extra);
        Ok(Self::assemble(servers, extra, None))
    }

    /// A store with explicit options (one host); connects on first use.
    pub fn connect_lazy_with(options: ConnectOptionsOf<DB>) -> Self {
        let extra = DB::Extra::default();
        let hosts = Hosts::new(vec![options], SessionAttrs::default());
        Self::assemble(Servers::own(hosts, &extra), extra, None)
    }

    /// A store over a pool the host already has. Its connections keep the host's
    /// settings (no statement time bound unless the host sets one; on MariaDB the session
    /// in UTC, sqlx's default, for timestamps to read back as written); version checks go
    /// through it as well. It does not follow a failover: the host's pool connects where
    /// the host says.
    pub fn from_pool(pool: Pool<DB>) -> Self {
        Self::assemble(Servers::new(pool), DB::Extra::default(), None)
    }

    /// A store over the host's pools: `primary` for writes and for whatever must be
    /// current, `replicas` for reads that may go there, as
    /// [`with_replicas`](Self::with_replicas) says.
    pub fn from_pools(primary: Pool<DB>, replicas: Vec<Pool<DB>>) -> Self {
        Self::from_pool(primary).with_replicas(replicas)
    }

    /// This store reading from `replicas` of its primary (PostgreSQL streaming replicas,
    /// MariaDB GTID replicas): pages and books are read there once a replica has applied
    /// the primary's position as the read began (so no read is older than a write
    /// acknowledged before it, by any process), else after a short wait
    /// ([`replica_wait`](Self::replica_wait)) from the primary. Writes, version checks,
    /// migrations and PostgreSQL's `LISTEN` stay on the primary. A replica that is down or
    /// lagging costs latency, never an error; it is asked again after
    /// [`DOWN_FOR`](crate::DOWN_FOR). A MariaDB primary needs its binary log on
    /// (`log_bin`): without one it has no position, and the primary answers every read.
    pub fn with_replicas(mut self, replicas: Vec<Pool<DB>>) -> Self {
        self.servers.replicas =
            (!replicas.is_empty()).then(|| Arc::new(Replicas::new(replicas, DEFAULT_WAIT)));
        self
    }

    /// How long a read waits for a replica to catch up before the primary answers it
    /// (default [`DEFAULT_REPLICA_WAIT`](crate::DEFAULT_REPLICA_WAIT)).
    pub fn replica_wait(mut self, wait: Duration) -> Self {
        self.servers.replicas = self
            .servers
            .replicas
            .as_ref()
            .map(|replicas| Arc::new(replicas.with_wait(wait)));
        self
    }

    /// Lazily connected pools for the replicas at `url`, one per host it names (so the
    /// same URL as the primary's, with `target_session_attrs=standby`, names a cluster's
    /// standbys), as the store would build them: the store's session settings, and a
    /// one-second wait for a connection (a replica that cannot be reached is left out
    /// quickly; a host that is not a replica, a primary, is left out as it says so).
    pub fn replica_pools_for(url: &str) -> Result<Vec<Pool<DB>>, Error> {
        let (urls, _) = url::split(url)?;
        urls.iter()
            .map(|url| {
                Ok(DB::pool_options(&DB::Extra::default())
                    .acquire_timeout(Duration::from_secs(1))
                    .connect_lazy_with(DB::parse(url)?))
            })
            .collect()
    }

    /// A lazily connected pool for the replica at `url` (one host): see
    /// [`replica_pools_for`](Self::replica_pools_for).
    pub fn replica_pool(url: &str) -> Result<Pool<DB>, Error> {
        Ok(DB::pool_options(&DB::Extra::default())
            .acquire_timeout(Duration::from_secs(1))
            .connect_lazy_with(Self::options(url)?))
    }

    /// The replicas' pools, if any.
    pub fn replica_pools(&self) -> Vec<Pool<DB>> {
        self.servers.replica_pools()
    }

    /// What the store knows of each replica: whether it is up, how far behind, how many
    /// reads it answered (the same as the `books_store_replica_*` metrics).
    pub fn replicas(&self) -> Vec<ReplicaState> {
        self.servers.replica_states()
    }

    /// The primary's pool, for embedders that keep their own tables beside ours.
    pub fn pool(&self) -> &Pool<DB> {
        &self.servers.pool
    }
}

/// The pool options every store's own pools start from.
pub(crate) fn base_pool_options<DB: Driver>() -> PoolOptions<DB> {
    PoolOptions::new()
        .max_connections(10)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .test_before_acquire(false)
}
