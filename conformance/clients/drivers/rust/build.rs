//! Tells the driver, at compile time, the exact async-nats and tokio releases Cargo.lock resolved and the rustc
//! that built it, so `hello` reports what really runs (Cargo has no runtime view of its lockfile).

use std::process::Command;

fn locked(lock: &str, package: &str) -> String {
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("name = \"{package}\"") {
            if let Some(version) = lines.next().and_then(|l| l.trim().strip_prefix("version = ")) {
                return version.trim_matches('"').to_string();
            }
        }
    }
    "unknown".to_string()
}

fn main() {
    println!("cargo:rerun-if-changed=Cargo.lock");
    let lock = std::fs::read_to_string("Cargo.lock").unwrap_or_default();
    println!("cargo:rustc-env=ASYNC_NATS_VERSION={}", locked(&lock, "async-nats"));
    println!("cargo:rustc-env=TOKIO_VERSION={}", locked(&lock, "tokio"));
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.split_whitespace().nth(1).map(|v| format!("rustc {v}")))
        .unwrap_or_else(|| "rustc unknown".to_string());
    println!("cargo:rustc-env=DRIVER_RUSTC_VERSION={version}");
}
