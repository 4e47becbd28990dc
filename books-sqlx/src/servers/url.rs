//! Multi-host URLs as libpq writes them: `postgres://user@h1:5432,h2:5433/db`, or the
//! hosts and ports as lists in the query (`?host=h1,h2&port=5432,5433`), with
//! `target_session_attrs`; split into one URL per host for the driver's own parser.

use super::roles::SessionAttrs;
use crate::Error;

/// The query parameters that describe the cluster rather than a connection.
const CLUSTER_PARAMETERS: [&str; 4] =
    ["host", "port", "target_session_attrs", "load_balance_hosts"];

/// The URLs of each host `url` names, in order, and the role its `target_session_attrs`
/// asks for (`None`: not given).
pub(crate) fn split(url: &str) -> Result<(Vec<String>, Option<SessionAttrs>), Error> {
    let invalid = |why: &str| Error::InvalidUrl(format!("{why}: {}", redacted(url)));
    let (scheme, rest) = url.split_once("://").ok_or_else(|| invalid("no scheme"))?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hostlist) = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (format!("{userinfo}@"), hosts),
        None => (String::new(), authority),
    };
    let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
    let mut kept = Vec::new();
    let (mut host_param, mut port_param, mut attrs) = (None, None, None);
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            "host" => host_param = Some(value),
            "port" => port_param = Some(value),
            "target_session_attrs" => {
                attrs = Some(
                    SessionAttrs::parse(value)
                        .ok_or_else(|| invalid("unknown target_session_attrs"))?,
                );
            }
            "load_balance_hosts" if value != "disable" => {
                return Err(invalid("load_balance_hosts other than disable"));
            }
            _ if CLUSTER_PARAMETERS.contains(&name) => {}
            _ => kept.push(pair),
        }
    }
    let mut hosts = split_list(hostlist)?;
    if let (true, Some(listed)) = (hosts.is_empty(), host_param) {
        let ports: Vec<&str> = port_param
            .map(|p| p.split(',').collect())
            .unwrap_or_default();
        for (index, host) in listed.split(',').enumerate() {
            let port = ports.get(index).or(ports.first()).copied();
            hosts.push((decode(host), port.map(str::to_owned)));
        }
    }
    if hosts.is_empty() {
        // No host at all (a socket, the driver's defaults): the URL as it is.
        let query = join_query(&kept, port_param.map(|p| format!("port={p}")));
        return Ok((vec![format!("{scheme}://{userinfo}{path}{query}")], attrs));
    }
    let urls = hosts
        .into_iter()
        .map(|(host, port)| {
            let port = port.or_else(|| port_param.map(str::to_owned));
            if host.starts_with('/') {
                // A Unix socket's directory: as the driver takes it, in the query.
                let mut extra = vec![format!("host={host}")];
                extra.extend(port.map(|p| format!("port={p}")));
                let query = join_query(&kept, Some(extra.join("&")));
                format!("{scheme}://{userinfo}{path}{query}")
            } else {
                let port = port.map(|p| format!(":{p}")).unwrap_or_default();
                let query = join_query(&kept, None);
                format!("{scheme}://{userinfo}{host}{port}{path}{query}")
            }
        })
        .collect();
    Ok((urls, attrs))
}

/// `h1:p1,[::1]:p2,h3` as hosts and their ports.
fn split_list(list: &str) -> Result<Vec<(String, Option<String>)>, Error> {
    let mut hosts = Vec::new();
    for entry in list.split(',').filter(|entry| !entry.is_empty()) {
        let (host, port) = match entry.strip_prefix('[') {
            Some(bracketed) => {
                let (address, after) = bracketed
                    .split_once(']')
                    .ok_or_else(|| Error::InvalidUrl(format!("unclosed [ in {entry}")))?;
                (format!("[{address}]"), after.strip_prefix(':'))
            }
            None => match entry.rsplit_once(':') {
                Some((host, port)) => (host.to_owned(), Some(port)),
                None => (entry.to_owned(), None),
            },
        };
        if let Some(port) = port
            && port.parse::<u16>().is_err()
        {
            return Err(Error::InvalidUrl(format!(
                "invalid port {port:?} in {entry}"
            )));
        }
        hosts.push((host, port.map(str::to_owned)));
    }
    Ok(hosts)
}

/// `?a=1&b=2` from the parameters kept and one more, or nothing.
fn join_query(kept: &[&str], extra: Option<String>) -> String {
    let mut parts: Vec<String> = kept.iter().map(|pair| (*pair).to_owned()).collect();
    parts.extend(extra);
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// A `host=` value percent-decoded (`%2Fvar%2Frun` is a socket's directory).
fn decode(text: &str) -> String {
    let mut out = Vec::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let hex = bytes
            .get(at + 1..at + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[at], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                at += 3;
            }
            (byte, _) => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `url` without its password, for an error message.
fn redacted(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{}{user}{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_in_the_authority_become_one_url_each() {
        let (urls, attrs) = split(
            "postgres://u:p@127.0.0.1:5432,[::1]:5433,db3/books?sslmode=disable&target_session_attrs=read-write",
        )
        .unwrap();
        assert_eq!(
            urls,
            [
                "postgres://u:p@127.0.0.1:5432/books?sslmode=disable",
                "postgres://u:p@[::1]:5433/books?sslmode=disable",
                "postgres://u:p@db3/books?sslmode=disable",
            ]
        );
        assert_eq!(attrs, Some(SessionAttrs::ReadWrite));
    }

    #[test]
    fn hosts_and_ports_in_the_query_are_lists_too() {
        let (urls, attrs) =
            split("postgresql:///books?host=h1,h2&port=5433,5434&target_session_attrs=standby")
                .unwrap();
        assert_eq!(
            urls,
            ["postgresql://h1:5433/books", "postgresql://h2:5434/books"]
        );
        assert_eq!(attrs, Some(SessionAttrs::Standby));
        let (urls, _) =
            split("postgres:///books?host=%2Fvar%2Frun%2Fpostgresql&port=5432").unwrap();
        assert_eq!(
            urls,
            ["postgres:///books?host=/var/run/postgresql&port=5432"]
        );
        let (urls, _) = split("postgres:///books?host=a,b&port=5440").unwrap();
        assert_eq!(urls, ["postgres://a:5440/books", "postgres://b:5440/books"]);
    }

    #[test]
    fn one_host_is_one_url_and_mysql_lists_hosts_alike() {
        assert_eq!(
            split("postgres://h/db").unwrap(),
            (vec!["postgres://h/db".into()], None)
        );
        let (urls, _) = split("mysql://root@n1:3306,n2:3307/test").unwrap();
        assert_eq!(
            urls,
            ["mysql://root@n1:3306/test", "mysql://root@n2:3307/test"]
        );
    }

    #[test]
    fn what_cannot_be_followed_is_refused_without_the_password() {
        for url in [
            "postgres://u:secret@h1:5432,h2:x/db",
            "postgres://u:secret@h/db?target_session_attrs=sometimes",
            "postgres://u:secret@h/db?load_balance_hosts=random",
            "postgres://u:secret@[::1/db",
        ] {
            let error = split(url).unwrap_err().to_string();
            assert!(!error.contains("secret"), "{error}");
        }
    }
}
