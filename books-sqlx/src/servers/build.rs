//! Building a PostgreSQL or MariaDB store over its URL (one host, or a cluster's), a
//! host's pool, and replicas.

use std::sync::Arc;
use std::time::Duration;

use sqlx::Pool;

use super::hosts::Hosts;
use super::replicas::{DEFAULT_WAIT, ReplicaState, Replicas};
use super::roles::SessionAttrs;
use super::{ConnectOptionsOf, Networked, RETRY_AFTER, Servers, url};
use crate::Error;
use crate::backend::SqlStore;

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
                Ok(_) => return Ok(()),
                // No deadline (`within` past what a clock holds): wait for ever.
                Err(why) if deadline.is_some_and(|d| std::time::Instant::now() >= d) => {
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
