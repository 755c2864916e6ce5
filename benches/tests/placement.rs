//! The load tool's `--server-cpus`: a server started on a CPU list runs there, under its own
//! pid, and serves (what keeps a many-core load run's clients off the server's cores).

use perpsim_benches::load::target::{Running, Target};

#[test]
fn a_server_started_on_a_cpu_list_is_allowed_only_those_cpus_and_serves() {
    let target = Target::Perpsim {
        name: "perpsim".into(),
        binary: perpsim_tests::binary(),
        living: false,
    };
    let server = Running::start(&target, Some("0"));
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid()))
        .expect("the server's /proc status");
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(str::trim);
    assert_eq!(allowed, Some("0"), "taskset ran the server itself");
    // Signing up a broker and a customer with a deposit goes through the signed API.
    assert_eq!(server.accounts(2).len(), 2);
}
