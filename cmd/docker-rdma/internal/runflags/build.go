package runflags

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-macvlan/rdma-macvlan/api"
	"github.com/rdma-macvlan/rdma-macvlan/internal/rdmaenv"
)

// Added are the flags that hand the container to the rdma-macvlan
// runtime, to go in front of the user's arguments (WithFlags), which are
// kept exactly as given (so a user's own -e RDMA_MACVLAN_... comes later
// and wins): --runtime rdma-macvlan unless the user gave --runtime,
// docker rdma run's own flags as the runtime's variables (-e
// RDMA_MACVLAN_...) and --memlock as --ulimit memlock (only when given:
// the runtime's default is unlimited).
func Added(p *Parsed) ([]string, error) {
	var out []string
	if p.Runtime == "" {
		out = append(out, "--runtime", api.RuntimeName)
	}
	env, err := Env(p.Own)
	if err != nil {
		return nil, err
	}
	for _, kv := range env {
		out = append(out, "-e", kv)
	}
	if p.Own.Memlock != "" {
		m, err := ParseMemlock(p.Own.Memlock)
		if err != nil {
			return nil, fmt.Errorf("--memlock: %w", err)
		}
		out = append(out, "--ulimit", "memlock="+m)
	}
	return out, nil
}

// Env are the runtime's variables (KEY=VALUE, api.Env*) that say what
// docker rdma's own flags ask: --no-wait, --gid-timeout, --roce-version,
// --gid-family and --accept-gid-mismatch, each only when given.
func Env(o Own) ([]string, error) {
	var out []string
	env := func(k, v string) { out = append(out, k+"="+v) }
	if o.NoWait {
		env(api.EnvNoWait, "1")
	}
	if v := o.GIDTimeout; v != "" {
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			return nil, fmt.Errorf("--gid-timeout %q: want a duration such as 10s or 1m", v)
		}
		env(api.EnvGIDTimeout, v)
	}
	if _, err := rdmaenv.ParseChoice(o.RoCEVersion, o.GIDFamily); err != nil {
		return nil, err
	}
	if v := o.RoCEVersion; v != "" {
		env(api.EnvRoCEVersion, v)
	}
	if v := o.GIDFamily; v != "" {
		env(api.EnvGIDFamily, v)
	}
	if o.AcceptMismatch {
		env(api.EnvAcceptMismatch, "1")
	}
	return out, nil
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
