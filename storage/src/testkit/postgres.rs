//! A real PostgreSQL server for tests: `initdb` and `pg_ctl` in a temporary directory (run as
//! the `postgres` user when the tests run as root, as PostgreSQL refuses root), trust
//! authentication, listening on 127.0.0.1 only, on a free port, TLS on with a self-signed
//! certificate (made by `openssl`). [`Postgres::crash`] stops it
//! the way a crash does (`-m immediate`), [`Postgres::restart`] starts it again on the same
//! port and data; dropping the guard stops it and removes the directory.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running PostgreSQL server (stopped on drop).
pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
}

impl Postgres {
    /// Creates a cluster and starts it. Panics with the reason (and the server's log) when
    /// PostgreSQL is missing or does not start.
    pub fn start() -> Self {
        let bin = bin_dir();
        let as_postgres = is_root();
        let dir = tempfile::Builder::new()
            .prefix("dyeline-pg-")
            .tempdir()
            .expect("a temporary directory");
        // A self-signed certificate: the server speaks TLS (`sslmode=require` connects;
        // `verify-full` refuses the unknown issuer).
        let cert = Command::new("openssl")
            .args([
                "req",
                "-new",
                "-x509",
                "-days",
                "2",
                "-nodes",
                "-subj",
                "/CN=127.0.0.1",
            ])
            .args([
                "-newkey",
                "rsa:2048",
                "-keyout",
                "server.key",
                "-out",
                "server.crt",
            ])
            .current_dir(dir.path())
            .output()
            .expect("openssl is not installed: apt-get install -y openssl");
        assert!(
            cert.status.success(),
            "openssl: {}",
            String::from_utf8_lossy(&cert.stderr)
        );
        if as_postgres {
            let owner = |flag: &str| -> u32 {
                let out = Command::new("id")
                    .args([flag, "postgres"])
                    .output()
                    .expect("id");
                String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .parse()
                    .expect("the postgres user (apt-get install postgresql)")
            };
            for path in [
                dir.path(),
                &dir.path().join("server.key"),
                &dir.path().join("server.crt"),
            ] {
                std::os::unix::fs::chown(path, Some(owner("-u")), Some(owner("-g")))
                    .expect("giving the directory to postgres");
            }
        }
        let pg = Self {
            port: super::free_ports(1)[0],
            dir,
            bin,
            as_postgres,
        };
        pg.run(&format!(
            "{} -D {} -A trust -U postgres --no-sync -E UTF8",
            pg.bin.join("initdb").display(),
            pg.data().display()
        ));
        pg.restart();
        pg
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL to its `postgres` database as user `postgres` with `password` (trust
    /// authentication ignores it: tests use it to check that it is never printed).
    pub fn url(&self, password: &str) -> String {
        format!(
            "postgres://postgres:{password}@127.0.0.1:{}/postgres",
            self.port
        )
    }

    /// Stops it as a crash would (`pg_ctl -m immediate stop`: no checkpoint, connections
    /// cut).
    pub fn crash(&self) {
        self.run(&format!(
            "{} -D {} -m immediate -w stop",
            self.bin.join("pg_ctl").display(),
            self.data().display()
        ));
    }

    /// Starts it (again) on the same port and data, waiting until it accepts connections.
    pub fn restart(&self) {
        let dir = self.dir.path().display();
        self.run(&format!(
            "{} -D {} -l {dir}/server.log -w -t 60 -o '-p {} -c listen_addresses=127.0.0.1 -k {dir} -c fsync=off \
             -c ssl=on -c ssl_cert_file={dir}/server.crt -c ssl_key_file={dir}/server.key' start",
            self.bin.join("pg_ctl").display(),
            self.data().display(),
            self.port,
        ));
    }

    /// Runs `sql` with `psql` (unaligned, tuples only) in its `postgres` database: the
    /// output, trimmed, or `None` when psql fails (the server is down, the table absent).
    pub fn psql(&self, sql: &str) -> Option<String> {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-At",
                "-c",
                sql,
            ])
            .arg("-p")
            .arg(self.port.to_string())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Runs `command` (as `postgres` when root); panics with its output and the server's log.
    fn run(&self, command: &str) {
        let out = if self.as_postgres {
            Command::new("su")
                .args(["postgres", "-s", "/bin/sh", "-c", command])
                .output()
        } else {
            Command::new("/bin/sh").args(["-c", command]).output()
        }
        .expect("running a PostgreSQL command");
        if !out.status.success() {
            let log =
                std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
            panic!(
                "`{command}` failed: {}{}\nserver log:\n{log}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let stop = format!(
            "{} -D {} -m immediate -w stop",
            self.bin.join("pg_ctl").display(),
            self.data().display()
        );
        // Already stopped (a test's crash) is fine.
        let _ = if self.as_postgres {
            Command::new("su")
                .args(["postgres", "-s", "/bin/sh", "-c", &stop])
                .output()
        } else {
            Command::new("/bin/sh").args(["-c", &stop]).output()
        };
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` holding `initdb`.
fn bin_dir() -> PathBuf {
    let root = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .expect("PostgreSQL is not installed: apt-get install -y postgresql")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
