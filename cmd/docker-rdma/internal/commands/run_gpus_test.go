package commands

import (
	"strings"
	"testing"

	"github.com/rdma-macvlan/rdma-macvlan/gpu/gputest"
)

// TestRunNotesNearestRails: docker rdma run --gpus says on stderr, in one
// note, which of its networks is nearest to each GPU it gives, and passes
// --gpus on as it is.
func TestRunNotesNearestRails(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		note string
	}{
		{name: "each GPU beside its own rail", args: []string{"--gpus", `"device=0,4"`, "--network", "rail0", "--network", "rail4"},
			note: "docker rdma run: note: nearest rails: GPU0 0000:1a:00.0 nearest rail0 (mlx5_0) PIX; GPU4 0000:9a:00.0 nearest rail4 (mlx5_4) PIX ("},
		{name: "a GPU on the other socket", args: []string{"--gpus", "1", "--network", "rail4"},
			note: "nearest rails: GPU0 0000:1a:00.0 nearest rail4 (mlx5_4) SYS ("},
		{name: "by UUID, two rails as near", args: []string{"--gpus=device=" + gputest.GPUs[7].UUID, "--network", "rail6", "--network", "rail7", "--network", "rail0"},
			note: "nearest rails: GPU7 0000:bc:00.0 nearest rail6 (mlx5_6), rail7 (mlx5_7) PIX ("},
		{name: "a GPU the host does not have", args: []string{"--gpus", "device=9", "--network", "rail0"},
			note: "docker rdma run: note: --gpus device=9: this host has 8 NVIDIA GPU(s), so no nearest rail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, root := railWorld(t, gputest.Options{}, mlx5Rails(), 0, 4, 6, 7)
			w.plugins = nil
			w.plugin("rdma-macvlan:latest", pluginID, true, map[string]string{"sysfs": root + "/sys"})
			rc := w.run(append(append([]string{"run", "--no-wait", "--dry-run"}, tc.args...), "img")...)
			if rc != 0 {
				t.Fatalf("status %d: %s", rc, w.stderr.String())
			}
			if !strings.Contains(w.stderr.String(), tc.note) || strings.Count(w.stderr.String(), "note:") != 1 {
				t.Errorf("stderr %q, want one note ~%q", w.stderr.String(), tc.note)
			}
			if !strings.Contains(w.stdout.String(), "--gpus") {
				t.Errorf("--gpus not passed on: %s", w.stdout.String())
			}
		})
	}
	t.Run("no --gpus, no note", func(t *testing.T) {
		w, _ := railWorld(t, gputest.Options{}, mlx5Rails(), 0)
		if rc := w.run("run", "--no-wait", "--dry-run", "--network", "rail0", "img"); rc != 0 || strings.Contains(w.stderr.String(), "note:") {
			t.Errorf("status %d, stderr %q", rc, w.stderr.String())
		}
	})
}
