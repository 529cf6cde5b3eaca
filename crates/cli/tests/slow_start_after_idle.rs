//! End-to-end test of the per-host `slow_start_after_idle` setting: each host's namespace must
//! hold the value its run file or `shell` option gave it, the kernel's default (1) where none
//! was given. Needs root and /dev/net/tun.

mod common;

use std::fs;

use common::*;

/// What `cat /proc/sys/net/ipv4/tcp_slow_start_after_idle` printed in each host of a lab.
const READ: &str = "cat /proc/sys/net/ipv4/tcp_slow_start_after_idle";

#[test]
fn each_host_namespace_gets_its_own_slow_start_after_idle() {
    let _g = lock();
    let dir = out_dir("ssai");
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ssai.toml");
    fs::write(
        &file,
        format!(
            "[[host]]\nname = \"client\"\n[[host]]\nname = \"server\"\n\
             slow_start_after_idle = false\n\
             [[link]]\nname = \"path\"\na = \"client\"\nb = \"server\"\n\
             [[program]]\nhost = \"client\"\nname = \"client\"\nrun = \"{READ}\"\nwait = true\n\
             [[program]]\nhost = \"server\"\nname = \"server\"\nrun = \"{READ}\"\nwait = true\n"
        ),
    )
    .unwrap();
    let out = dir.join("run");
    let o = run(&[
        "run",
        "-q",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let value = |name: &str| {
        fs::read_to_string(out.join("programs").join(format!("{name}.out")))
            .unwrap_or_else(|e| panic!("{name}.out: {e}"))
    };
    assert_eq!(value("client"), "1\n");
    assert_eq!(value("server"), "0\n");
    assert_nothing_left();

    let o = run(&[
        "shell",
        "-q",
        "--slow-start-after-idle",
        "0",
        "--",
        "sh",
        "-c",
        READ,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "0\n");
    let o = run(&[
        "shell",
        "-q",
        "--slow-start-after-idle",
        "maybe",
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("'maybe'"), "{}", text(&o.stderr));
    assert_nothing_left();
    let _ = fs::remove_dir_all(&dir);
}
