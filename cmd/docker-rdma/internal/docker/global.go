package docker

import (
	"fmt"
	"strings"
)

// globalValue and globalBool are the global options of the docker CLI
// (docker --help), which a CLI plugin is given before its own name and must
// honour: `docker --context x rdma ls` runs `docker-rdma --context x rdma ls`.
var (
	globalValue = map[string]bool{
		"--config": true, "-c": true, "--context": true, "-H": true, "--host": true,
		"-l": true, "--log-level": true, "--tlscacert": true, "--tlscert": true, "--tlskey": true,
	}
	globalBool = map[string]bool{
		"-D": true, "--debug": true, "--tls": true, "--tlsverify": true,
	}
)

// SplitGlobal takes docker's global options off the front of args and
// returns them (to pass to every docker command) and the rest.
func SplitGlobal(args []string) (global, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasVal := strings.Cut(a, "=")
		switch {
		case globalBool[name]:
			global = append(global, a)
		case globalValue[name] && hasVal:
			global = append(global, a)
		case globalValue[name]:
			if i+1 >= len(args) {
				return nil, nil, fmt.Errorf("docker option %s needs a value", a)
			}
			global = append(global, a, args[i+1])
			i++
		case len(a) > 2 && a[0] == '-' && a[1] != '-' && globalValue[a[:2]]:
			// -Hunix:///x, -cname
			global = append(global, a)
		default:
			return global, args[i:], nil
		}
	}
	return global, nil, nil
}
