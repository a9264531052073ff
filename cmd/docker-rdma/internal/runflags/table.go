package runflags

// The flags of `docker run` (Docker 20.10 to 28), needed to tell a flag's
// value from IMAGE: `docker run -e X busybox` has IMAGE busybox, `docker run
// -d busybox` too. Taken from `docker run --help` of both versions plus the
// hidden aliases (--net, --net-alias, --dns-opt); TestTableMatchesDockerHelp
// checks the table against every docker CLI it finds.

// longValue are the long flags that take a value.
var longValue = setOf(
	"add-host", "annotation", "attach", "blkio-weight", "blkio-weight-device",
	"cap-add", "cap-drop", "cgroup-parent", "cgroupns", "cidfile",
	"cpu-count", "cpu-percent", "cpu-period", "cpu-quota", "cpu-rt-period", "cpu-rt-runtime",
	"cpu-shares", "cpus", "cpuset-cpus", "cpuset-mems",
	"detach-keys", "device", "device-cgroup-rule",
	"device-read-bps", "device-read-iops", "device-write-bps", "device-write-iops",
	"dns", "dns-opt", "dns-option", "dns-search", "domainname",
	"entrypoint", "env", "env-file", "expose",
	"gpus", "group-add",
	"health-cmd", "health-interval", "health-retries", "health-start-interval",
	"health-start-period", "health-timeout", "hostname",
	"io-maxbandwidth", "io-maxiops", "ip", "ip6", "ipc", "isolation",
	"kernel-memory",
	"label", "label-file", "link", "link-local-ip", "log-driver", "log-opt",
	"mac-address", "memory", "memory-reservation", "memory-swap", "memory-swappiness", "mount",
	"name", "net", "net-alias", "network", "network-alias",
	"oom-score-adj",
	"pid", "pids-limit", "platform", "publish", "pull",
	"restart", "runtime",
	"security-opt", "shm-size", "stop-signal", "stop-timeout", "storage-opt", "sysctl",
	"tmpfs",
	"ulimit", "user", "userns", "uts",
	"volume", "volume-driver", "volumes-from",
	"workdir",
)

// longBool are the long flags that take no value (an optional =true/false
// may follow).
var longBool = setOf(
	"detach", "disable-content-trust", "help", "init", "interactive",
	"no-healthcheck", "oom-kill-disable", "privileged", "publish-all", "quiet",
	"read-only", "rm", "sig-proxy", "tty", "use-api-socket",
)

// shortValue are the one-letter flags that take a value, with their long
// names.
var shortValue = map[byte]string{
	'a': "attach", 'c': "cpu-shares", 'e': "env", 'h': "hostname", 'l': "label",
	'm': "memory", 'p': "publish", 'u': "user", 'v': "volume", 'w': "workdir",
}

// shortBool are the one-letter flags that take no value.
var shortBool = map[byte]string{
	'd': "detach", 'i': "interactive", 't': "tty", 'P': "publish-all", 'q': "quiet",
}

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// TakesValue reports whether the long docker run flag name (without
// dashes) takes a value; known is false for a flag not in the table.
func TakesValue(name string) (value, known bool) {
	switch {
	case longValue[name]:
		return true, true
	case longBool[name]:
		return false, true
	}
	return false, false
}
