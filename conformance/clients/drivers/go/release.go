// Ops by release: every op registers its handler from the file that holds it, so a file needing API that a nats.go
// release lacks can be left out of that release's build. build.py does so at build time, from the compiler's own
// errors: it removes each file marked `//jetcheck:feature <name>` that does not compile against the release and
// writes a file in its place that calls notInRelease with what the compiler said is missing. Files without the mark
// are the core, which compiles against every release from the first with the jetstream package (v1.26.0); where a
// call it makes changed shape, it asks the value which shape it has (publishMsgAsync).

package main

import (
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

type opHandler func(d *driver, req *request) (any, error)

var (
	opHandlers = map[string]opHandler{}
	// absent: what this build's release lacks, by feature (the files left out of the build)
	absent = map[string]string{}
	// absentOps: the feature each op left out belongs to
	absentOps = map[string]string{}
)

func handles(handler opHandler, ops ...string) {
	for _, op := range ops {
		opHandlers[op] = handler
	}
}

// notInRelease registers the ops of a feature left out of the build: each answers kind not_in_release.
func notInRelease(feature, lacks string, ops ...string) {
	absent[feature] = lacks
	for _, op := range ops {
		absentOps[op] = feature
	}
	handles(func(*driver, *request) (any, error) { return nil, lacking(feature) }, ops...)
}

// lacking is the answer for a call needing a feature this release lacks (PROTOCOL.md, error kind not_in_release).
func lacking(feature string) error {
	lacks, ok := absent[feature]
	if !ok {
		lacks = feature
	}
	return failure("not_in_release", "not in nats.go %s: %s", clientVersion(), lacks)
}

func implementedOps() []string {
	ops := []string{"shutdown"}
	for op := range opHandlers {
		if _, gone := absentOps[op]; !gone {
			ops = append(ops, op)
		}
	}
	sort.Strings(ops)
	return ops
}

// notInReleaseFeatures says, per feature left out, what the release lacks and which ops answer not_in_release.
func notInReleaseFeatures() map[string]string {
	ops := map[string][]string{}
	for op, feature := range absentOps {
		ops[feature] = append(ops[feature], op)
	}
	features := map[string]string{}
	for feature, lacks := range absent {
		features[feature] = lacks
		if len(ops[feature]) > 0 {
			sort.Strings(ops[feature])
			features[feature] += " (ops " + strings.Join(ops[feature], ", ") + ")"
		}
	}
	return features
}

// Optional calls inside core ops, set by their feature files when the release has them.
var (
	// fetchHeartbeat is jetstream.FetchHeartbeat (fetchheartbeat.go)
	fetchHeartbeat func(time.Duration) jetstream.FetchOpt
	// closedOf is ConsumeContext.Closed() (consumeclosed.go); a nil channel: the release cannot tell
	closedOf = func(jetstream.ConsumeContext) <-chan struct{} { return nil }
)
