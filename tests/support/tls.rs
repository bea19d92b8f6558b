//! A TLS server on loopback for the HTTPS tests: certificates made with the `openssl` command
//! (a test CA, and leaf certificates that are self-signed, for the wrong name, expired or good),
//! and a proxy that ends TLS with one of them and passes the plain bytes on to a test server
//! (the model server, a file server, an MCP server), counting what got through.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use rustls::ServerConnection;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The name every leaf but [`Leaf::WrongName`] is for.
pub const HOST: &str = "localhost";
/// The name [`Leaf::WrongName`] is for.
pub const WRONG_NAME: &str = "wrong-name.rawko.test";

/// A leaf certificate the server can present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leaf {
    /// For `localhost`, signed by its own key.
    SelfSigned,
    /// For `localhost`, signed by its own key and marked as a CA's, as `openssl req -x509`
    /// makes one by default.
    SelfSignedCa,
    /// From the test CA, for [`WRONG_NAME`].
    WrongName,
    /// From the test CA, for `localhost`, valid only in January 2020.
    Expired,
    /// From the test CA, for `localhost`, valid now.
    Good,
}

impl Leaf {
    fn file(self) -> &'static str {
        match self {
            Leaf::SelfSigned => "self-signed",
            Leaf::SelfSignedCa => "self-signed-ca",
            Leaf::WrongName => "wrong-name",
            Leaf::Expired => "expired",
            Leaf::Good => "good",
        }
    }
}

const OPENSSL_CNF: &str = r#"
[ ca ]
default_ca = test_ca

[ test_ca ]
database = index.txt
new_certs_dir = issued
certificate = ca.pem
private_key = ca.key
serial = serial
default_md = sha256
policy = any_name
unique_subject = no
email_in_dn = no
copy_extensions = none

[ any_name ]
commonName = supplied

[ req ]
distinguished_name = dn
prompt = no

[ dn ]
CN = rawko test

[ v3_ca ]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash

[ ca_localhost ]
basicConstraints = critical,CA:TRUE
subjectAltName = DNS:localhost,IP:::ffff:127.0.0.1

[ leaf_localhost ]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost,IP:::ffff:127.0.0.1

[ leaf_wrong ]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:wrong-name.rawko.test
"#;

/// The test CA and its leaves, in a directory of their own.
pub struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    /// Make the CA and every [`Leaf`] with `openssl`.
    pub fn generate() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("openssl.cnf"), OPENSSL_CNF).unwrap();
        std::fs::write(d.join("index.txt"), "").unwrap();
        std::fs::write(d.join("serial"), "1000\n").unwrap();
        std::fs::create_dir(d.join("issued")).unwrap();
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        openssl(
            d,
            &[
                "req",
                "-x509",
                "-config",
                "openssl.cnf",
                "-extensions",
                "v3_ca",
            ],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "30",
                "-subj",
                "/CN=rawko test CA",
            ],
        );
        for (leaf, ext) in [
            ("self-signed", "leaf_localhost"),
            ("self-signed-ca", "ca_localhost"),
        ] {
            let (key, pem) = (format!("{leaf}.key"), format!("{leaf}.pem"));
            let x509 = ["req", "-x509", "-config", "openssl.cnf", "-extensions", ext];
            let out = [
                "-keyout",
                &key,
                "-out",
                &pem,
                "-days",
                "30",
                "-subj",
                "/CN=localhost",
            ];
            openssl(d, &x509, &ec, &out);
        }
        for (leaf, cn, ext, dates) in [
            ("wrong-name", WRONG_NAME, "leaf_wrong", None),
            (
                "expired",
                HOST,
                "leaf_localhost",
                Some(("20200101000000Z", "20200201000000Z")),
            ),
            ("good", HOST, "leaf_localhost", None),
        ] {
            openssl(
                d,
                &["req", "-config", "openssl.cnf"],
                &ec,
                &[
                    "-keyout",
                    &format!("{leaf}.key"),
                    "-out",
                    &format!("{leaf}.csr"),
                    "-subj",
                    &format!("/CN={cn}"),
                ],
            );
            let mut args = vec![
                "ca",
                "-batch",
                "-notext",
                "-config",
                "openssl.cnf",
                "-extensions",
                ext,
                "-in",
            ];
            let (csr, pem) = (format!("{leaf}.csr"), format!("{leaf}.pem"));
            args.extend([csr.as_str(), "-out", pem.as_str()]);
            match dates {
                Some((from, to)) => args.extend(["-startdate", from, "-enddate", to]),
                None => args.extend(["-days", "30"]),
            }
            openssl(d, &args, &[], &[]);
        }
        for name in [
            "ca",
            "self-signed",
            "self-signed-ca",
            "wrong-name",
            "expired",
            "good",
        ] {
            openssl(
                d,
                &[
                    "x509",
                    "-in",
                    &format!("{name}.pem"),
                    "-outform",
                    "DER",
                    "-out",
                ],
                &[],
                &[&format!("{name}.der")],
            );
            openssl(
                d,
                &["pkcs8", "-topk8", "-nocrypt", "-in", &format!("{name}.key")],
                &[],
                &["-outform", "DER", "-out", &format!("{name}.key.der")],
            );
        }
        Pki { dir }
    }

    /// The CA's certificate, PEM: what `SSL_CERT_FILE` points at to trust it.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    fn config(&self, leaf: Leaf) -> Arc<rustls::ServerConfig> {
        let d = self.dir.path();
        let cert = std::fs::read(d.join(format!("{}.der", leaf.file()))).unwrap();
        let key = std::fs::read(d.join(format!("{}.key.der", leaf.file()))).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert)],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
        )
        .unwrap();
        Arc::new(config)
    }
}

fn openssl(dir: &Path, a: &[&str], b: &[&str], c: &[&str]) {
    let program = super::services::require_program("openssl", "openssl");
    let out = Command::new(program)
        .current_dir(dir)
        .args(a)
        .args(b)
        .args(c)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {a:?} {b:?} {c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A TLS server on 127.0.0.1 presenting one leaf, passing what comes through to `upstream`.
pub struct TlsProxy {
    pub port: u16,
    handshakes: Arc<AtomicUsize>,
    forwarded: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl TlsProxy {
    pub fn start(pki: &Pki, leaf: Leaf, upstream: SocketAddr) -> TlsProxy {
        let config = pki.config(leaf);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let handshakes = Arc::new(AtomicUsize::new(0));
        let forwarded = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, f, s) = (handshakes.clone(), forwarded.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((tcp, _)) => {
                        let (config, h, f, s) = (config.clone(), h.clone(), f.clone(), s.clone());
                        std::thread::spawn(move || relay(tcp, config, upstream, &h, &f, &s));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        TlsProxy {
            port,
            handshakes,
            forwarded,
            stop,
            thread: Some(thread),
        }
    }

    /// `https://localhost:PORT`.
    pub fn url(&self) -> String {
        format!("https://{HOST}:{}", self.port)
    }

    /// TLS handshakes the client completed.
    pub fn handshakes(&self) -> usize {
        self.handshakes.load(Ordering::SeqCst)
    }

    /// Plain bytes passed on to the upstream server.
    pub fn forwarded(&self) -> usize {
        self.forwarded.load(Ordering::SeqCst)
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One connection: TLS with the client, plain TCP with `upstream`, opened once the handshake
/// is done.
fn relay(
    mut tcp: TcpStream,
    config: Arc<rustls::ServerConfig>,
    upstream: SocketAddr,
    handshakes: &AtomicUsize,
    forwarded: &AtomicUsize,
    stop: &AtomicBool,
) {
    let Ok(mut conn) = ServerConnection::new(config) else {
        return;
    };
    if tcp.set_nonblocking(true).is_err() {
        return;
    }
    let mut up: Option<TcpStream> = None;
    let mut buf = vec![0u8; 16 * 1024];
    while !stop.load(Ordering::SeqCst) {
        let mut busy = false;
        match conn.read_tls(&mut tcp) {
            Ok(0) => return,
            Ok(_) => {
                busy = true;
                if conn.process_new_packets().is_err() {
                    // Send our alert, if any, and give up.
                    let _ = flush_tls(&mut conn, &mut tcp);
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
        if up.is_none() && !conn.is_handshaking() {
            handshakes.fetch_add(1, Ordering::SeqCst);
            let Ok(u) = TcpStream::connect(upstream) else {
                return;
            };
            if u.set_nonblocking(true).is_err() {
                return;
            }
            up = Some(u);
        }
        if let Some(u) = up.as_mut() {
            loop {
                match conn.reader().read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        busy = true;
                        if write_all(u, &buf[..n]).is_err() {
                            return;
                        }
                        forwarded.fetch_add(n, Ordering::SeqCst);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(_) => return,
                }
            }
            match u.read(&mut buf) {
                Ok(0) => {
                    conn.send_close_notify();
                    let _ = flush_tls(&mut conn, &mut tcp);
                    return;
                }
                Ok(n) => {
                    busy = true;
                    if conn.writer().write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
        if flush_tls(&mut conn, &mut tcp).is_err() {
            return;
        }
        if !busy {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn flush_tls(conn: &mut ServerConnection, tcp: &mut TcpStream) -> std::io::Result<()> {
    while conn.wants_write() {
        match conn.write_tls(tcp) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn write_all(to: &mut TcpStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        match to.write(bytes) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
