"""The kinds of fault jetcheck durability draws from, and how long one is held (a shared leaf: the option table
offers them, jetcheck.durability.faults does them)."""

from __future__ import annotations

# kill -9 of the stream's leader, of a minority of the nodes, of every node at once; SIGSTOP of the leader or of a
# minority, then SIGCONT
PROCESS_FAULTS = ("kill-leader", "kill-minority", "kill-all", "pause-leader", "pause-minority")
# kill -9 of a minority, then, while they are down, their stream's last message block file truncated or one of its
# bits flipped (as a torn write or a bad sector leaves it), or the newest Raft snapshot of each of their Raft groups
# deleted (as a lost file leaves it); or kill -9 of every node, and one of them (drawn) damaged while all are down
# (Jepsen's single-node corruption while the other nodes restart too); asked for by name, so the default schedules
# stay as they were
DISK_FAULTS = ("truncate-minority", "bitflip-minority", "snapshot-minority", "truncate-one-kill-all",
               "bitflip-one-kill-all")  # fmt: skip
# route links cut through the cluster's relays (fixtures.relay): the minority from the majority, the leader from
# every other node, or two sides apart while one node (the bridge) still reaches both; or the leader's links stalled
# (bytes held, TCP up). Asked for by name too: they need a cluster built with relays, and the default schedules (the
# durability guide's figures) stay as they were
# and a share of the packets of the leader's links, or of the minority's, dropped: real packet loss
# (durability.packet_loss), so the run goes into a network namespace of its own
LOSS_FAULTS = ("lossy-leader", "lossy-minority")
# or every read on the leader's links held a while before the relay forwards it
NETWORK_FAULTS = ("partition-minority", "partition-leader", "partition-bridge", "stall-leader", "slow-leader",
                  *LOSS_FAULTS)  # fmt: skip
# a power cut of every node, of one, or of a minority: kill -9, then what they wrote but did not fsync is dropped
# (durability.power_loss, a FUSE layer under each store, mounted only when one of these is asked for), then they
# are started again on what they synced
POWER_FAULTS = ("power-cut-all", "power-cut-one", "power-cut-minority")
# a membership change as Jepsen's nemesis made it (nats-io/nats-server#7545): the stream's leader or a follower
# (drawn) killed, its store wiped and the node peer-removed from the stream and the JetStream meta group through the
# API, then, at the heal, joined again as a new server on its empty store; or the same right after kill -9 of a
# minority of the other nodes (#7545's loss: kills and a removal in quick succession). Asked for by name: they give
# the cluster a system account (durability.membership)
MEMBER_FAULTS = ("member-cycle", "member-cycle-kill-minority")
FAULT_KINDS = PROCESS_FAULTS + DISK_FAULTS + NETWORK_FAULTS + POWER_FAULTS + MEMBER_FAULTS
HOLD_S = (1.0, 4.0)  # how long a fault lasts before it is healed, drawn per fault (the default)
