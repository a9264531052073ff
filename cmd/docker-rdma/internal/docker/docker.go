// Package docker talks to Docker the way the user does: by running the
// docker CLI, so that contexts, DOCKER_HOST, TLS settings and the CLI's
// config apply exactly as they do for the user's own commands.
package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// CLI runs one docker executable with the global options the user gave.
type CLI struct {
	// Path is the docker executable (a name is looked up in PATH).
	Path string
	// Global are docker's global options (--context, -H, --config, --tls*,
	// ...), put before every command.
	Global []string
}

// Error is a docker command that failed.
type Error struct {
	Args     []string
	ExitCode int
	Stderr   string
	Err      error
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("docker %s: %s", strings.Join(e.Args, " "), msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Argv returns the arguments for the docker executable: the global options,
// then args.
func (c *CLI) Argv(args ...string) []string {
	return append(append([]string{}, c.Global...), args...)
}

// Output runs docker with args and returns its standard output. A non-zero
// exit is an *Error carrying the standard error.
func (c *CLI) Output(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.Path, c.Argv(args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		e := &Error{Args: args, ExitCode: -1, Stderr: stderr.String(), Err: err}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			e.ExitCode = exit.ExitCode()
		}
		return out, e
	}
	return out, nil
}

// outputJSON runs docker and decodes its output into v.
func (c *CLI) outputJSON(ctx context.Context, v any, args ...string) error {
	out, err := c.Output(ctx, args...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("decode the output of docker %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// Info is the part of `docker info` read here.
type Info struct {
	ID              string
	Name            string // the daemon host's name
	ServerVersion   string
	OperatingSystem string
	KernelVersion   string
	// CDISpecDirs lists where the daemon reads CDI specs; empty on engines
	// without CDI (Docker < 25) or with CDI turned off.
	CDISpecDirs []string
	Plugins     struct {
		Network []string
	}
	Warnings []string
}

// Info runs docker info.
func (c *CLI) Info(ctx context.Context) (Info, error) {
	var i Info
	err := c.outputJSON(ctx, &i, "info", "--format", "{{json .}}")
	return i, err
}

// NetworkSummary is one line of docker network ls.
type NetworkSummary struct {
	ID, Name, Driver, Scope string
}

// Networks lists every network.
func (c *CLI) Networks(ctx context.Context) ([]NetworkSummary, error) {
	out, err := c.Output(ctx, "network", "ls", "--no-trunc", "--format", "{{json .}}")
	if err != nil {
		return nil, err
	}
	var nets []NetworkSummary
	for _, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var n NetworkSummary
		if err := json.Unmarshal([]byte(line), &n); err != nil {
			return nil, fmt.Errorf("decode docker network ls line %q: %w", line, err)
		}
		nets = append(nets, n)
	}
	return nets, nil
}

// Network is the part of docker network inspect read here.
type Network struct {
	Name       string
	ID         string `json:"Id"`
	Driver     string
	Scope      string
	Options    map[string]string
	Containers map[string]NetworkContainer
	IPAM       struct {
		Config []struct{ Subnet string }
	}
}

// NetworkContainer is one container on a network.
type NetworkContainer struct {
	Name        string
	EndpointID  string
	MacAddress  string
	IPv4Address string
	IPv6Address string
}

// NetworkInspect inspects one network by name or ID.
func (c *CLI) NetworkInspect(ctx context.Context, name string) (Network, error) {
	var nets []Network
	if err := c.outputJSON(ctx, &nets, "network", "inspect", "--", name); err != nil {
		return Network{}, err
	}
	if len(nets) != 1 {
		return Network{}, fmt.Errorf("docker network inspect %s: %d networks answered", name, len(nets))
	}
	return nets[0], nil
}

// Container is the part of docker container inspect read here.
type Container struct {
	ID   string `json:"Id"`
	Name string
	// Path and Args are the process the container runs (its entrypoint
	// and command).
	Path  string
	Args  []string
	State struct {
		Status  string
		Running bool
		Pid     int
	}
	HostConfig struct {
		Privileged     bool
		CapAdd         []string
		CapDrop        []string
		Devices        []DeviceMapping
		DeviceRequests []DeviceRequest
		Ulimits        []Ulimit
	}
	NetworkSettings struct {
		Networks map[string]EndpointSettings
	}
}

// DeviceMapping is a --device host path.
type DeviceMapping struct {
	PathOnHost, PathInContainer, CgroupPermissions string
}

// DeviceRequest is how Docker 28 records --device with a CDI name (Driver
// "cdi").
type DeviceRequest struct {
	Driver    string
	DeviceIDs []string
}

// Ulimit is one --ulimit.
type Ulimit struct {
	Name       string
	Soft, Hard int64
}

// EndpointSettings is a container's endpoint on one network.
type EndpointSettings struct {
	NetworkID         string
	EndpointID        string
	IPAddress         string
	IPPrefixLen       int
	GlobalIPv6Address string
	MacAddress        string
}

// ContainerInspect inspects one container by name or ID.
func (c *CLI) ContainerInspect(ctx context.Context, name string) (Container, error) {
	var cs []Container
	if err := c.outputJSON(ctx, &cs, "container", "inspect", "--", name); err != nil {
		return Container{}, err
	}
	if len(cs) != 1 {
		return Container{}, fmt.Errorf("docker container inspect %s: %d containers answered", name, len(cs))
	}
	return cs[0], nil
}

// Plugin is the part of docker plugin inspect read here.
type Plugin struct {
	ID      string `json:"Id"`
	Name    string
	Enabled bool
	Config  struct {
		Entrypoint []string
		Interface  struct {
			Types  []string
			Socket string
		}
		Mounts []PluginMount
	}
	Settings struct {
		Mounts []PluginMount
		Env    []string
	}
}

// PluginMount is one mount of a managed plugin.
type PluginMount struct {
	Name        string
	Source      string
	Destination string
}

// MountSource returns the source of the plugin's mount called name as the
// engine mounts it: from Config.Mounts, where `docker plugin set` writes.
// Settings.Mounts can lag behind: after `docker plugin install` or
// `upgrade` it keeps the sources of that moment whatever is set later
// (seen on Docker 20.10 and the current engine).
func (p Plugin) MountSource(name string) string {
	for _, ms := range [][]PluginMount{p.Config.Mounts, p.Settings.Mounts} {
		for _, m := range ms {
			if m.Name == name {
				return m.Source
			}
		}
	}
	return ""
}

// Plugins lists the managed plugins of the daemon.
func (c *CLI) Plugins(ctx context.Context) ([]Plugin, error) {
	out, err := c.Output(ctx, "plugin", "ls", "--no-trunc", "--format", "{{.ID}}")
	if err != nil {
		return nil, err
	}
	ids := strings.Fields(string(out))
	if len(ids) == 0 {
		return nil, nil
	}
	var ps []Plugin
	if err := c.outputJSON(ctx, &ps, append([]string{"plugin", "inspect"}, ids...)...); err != nil {
		return nil, err
	}
	return ps, nil
}

// ImageConfig is the part of an image's config that says what it runs.
type ImageConfig struct {
	Entrypoint []string
	Cmd        []string
}

// ImageInspect returns the config of a local image; an *Error when the
// image is not there.
func (c *CLI) ImageInspect(ctx context.Context, image string) (ImageConfig, error) {
	var cfg ImageConfig
	err := c.outputJSON(ctx, &cfg, "image", "inspect", "--format", "{{json .Config}}", "--", image)
	return cfg, err
}
