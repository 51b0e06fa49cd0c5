"""Durability: `jetcheck durability` and what it is made of, one module per job.

- cli: the command (its options, the cluster it runs on, results.jsonl and run.json)
- session: one run on a cluster that is up (stream, workload beside the schedule, heal, drain, final read)
- workload: the paced publishers and the durable consumer, every step recorded
- schedule: the seeded fault schedule, done and healed in turn
- faults: kills, pauses, cut or lossy links and damaged stores, and their heal
- packet_loss: real packet loss in a network namespace of the run's own
- power_loss: power cuts: a FUSE layer under each node's store that drops what was not fsynced
- described_cluster: a user's cluster described in a TOML file, faulted through its own commands
- history: the records a run writes into history/
- checker: which durability.* rules the history shows held

`jetcheck report` draws a durability run with reports.durability_report, which reads history/ with the checker.
"""
