package runflags

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// IPCLock is the capability docker rdma run adds.
const IPCLock = "IPC_LOCK"

// Devices are the RDMA devices a run needs, in one of two forms.
type Devices struct {
	// CDI are CDI device names (rdma-macvlan/hca=mlx5_0), for engines that
	// resolve CDI devices.
	CDI []string
	// Nodes are host device node paths (/dev/infiniband/uverbs0), for
	// --device on any engine.
	Nodes []string
}

// Plan is what Build adds and why some of it was left out.
type Plan struct {
	// Argv is the docker command line after the docker executable and its
	// global options: "run", the added flags, then the user's arguments.
	Argv []string
	// Added are the flags Build put in front of the user's arguments.
	Added []string
	// Notes say what was left out because the user's own flags cover it.
	Notes []string
}

// Build returns the docker run command line: the flags RDMA needs (devices,
// --cap-add IPC_LOCK, --ulimit memlock=...), each left out when the user's
// arguments already have it, in front of the user's arguments, which are
// kept exactly as given. memlock is an Ulimit value such as "-1:-1".
func Build(p *Parsed, dev Devices, memlock string) Plan {
	var plan Plan
	add := func(flag, val string) { plan.Added = append(plan.Added, flag, val) }
	for _, name := range dev.CDI {
		if p.HasDevice("", name) {
			plan.Notes = append(plan.Notes, "device "+name+" given already")
			continue
		}
		add("--device", name)
	}
	for _, n := range dev.Nodes {
		if p.HasDevice(n, "") {
			plan.Notes = append(plan.Notes, "device "+n+" given already")
			continue
		}
		add("--device", n)
	}
	switch {
	case p.DropsCap(IPCLock):
		plan.Notes = append(plan.Notes, "--cap-drop "+IPCLock+" given: not adding it (pinned memory then counts against the memlock limit)")
	case p.AddsCap(IPCLock):
	default:
		add("--cap-add", IPCLock)
	}
	if p.UlimitMemlock != "" {
		plan.Notes = append(plan.Notes, "--ulimit "+p.UlimitMemlock+" given: keeping it")
	} else {
		add("--ulimit", "memlock="+memlock)
	}
	plan.Argv = append(append([]string{"run"}, plan.Added...), p.Args...)
	return plan
}

// ErrMemlock marks a --memlock value that is not a limit.
var ErrMemlock = errors.New("invalid memlock limit")

// ParseMemlock turns a --memlock value into the soft:hard value of docker
// run --ulimit memlock=, in bytes: "" and "unlimited" and "-1" mean -1:-1;
// a size is bytes or has a K, M or G suffix (KiB, MiB, GiB); "SOFT:HARD"
// sets both limits (soft <= hard).
func ParseMemlock(v string) (string, error) {
	if v == "" {
		v = "-1"
	}
	softText, hardText, pair := strings.Cut(v, ":")
	if !pair {
		hardText = softText
	}
	soft, err := parseLimit(softText)
	if err != nil {
		return "", fmt.Errorf("%w %q: %w", ErrMemlock, v, err)
	}
	hard, err := parseLimit(hardText)
	if err != nil {
		return "", fmt.Errorf("%w %q: %w", ErrMemlock, v, err)
	}
	if hard >= 0 && (soft < 0 || soft > hard) {
		return "", fmt.Errorf("%w %q: the soft limit is above the hard limit", ErrMemlock, v)
	}
	return strconv.FormatInt(soft, 10) + ":" + strconv.FormatInt(hard, 10), nil
}

// parseLimit reads -1, unlimited, N, NK, NM, NG (also Ki/KiB/KB, ...).
func parseLimit(s string) (int64, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "-1", "unlimited", "infinity":
		return -1, nil
	case "":
		return 0, errors.New("empty limit")
	}
	mult, num := int64(1), s
	lower := strings.ToLower(s)
	for _, u := range units {
		if strings.HasSuffix(lower, u.suffix) {
			mult, num = u.mult, s[:len(s)-len(u.suffix)]
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size in bytes, K, M or G, nor -1/unlimited", s)
	}
	if n > (1<<63-1)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}

// units are the size suffixes ParseMemlock accepts, longest first.
var units = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1},
}
