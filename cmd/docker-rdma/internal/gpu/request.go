package gpu

import (
	"encoding/csv"
	"fmt"
	"strconv"
	"strings"
)

// Requested returns the GPUs a docker run --gpus value gives a container,
// read as docker reads it (CSV fields: all, a count, count=N, device=LIST
// with indexes or UUIDs; driver=, capabilities= and options= do not choose
// GPUs). uuids maps UUIDs to PCI addresses (see UUIDs). Docker gives a
// count as the first N indexes.
func Requested(value string, gpus []Device, uuids map[string]string) ([]Device, error) {
	fields, err := csv.NewReader(strings.NewReader(value)).Read()
	if err != nil {
		return nil, fmt.Errorf("--gpus %q: %w", value, err)
	}
	count, devices := 0, []string(nil)
	for _, f := range fields {
		key, val, hasVal := strings.Cut(f, "=")
		switch key = strings.ToLower(key); {
		case !hasVal && key == "all", key == "count" && val == "all":
			count = -1
		case !hasVal, key == "count":
			n, err := strconv.Atoi(firstNonEmpty(val, key))
			if err != nil || n < 0 {
				return nil, fmt.Errorf("--gpus %q: %q is not all, a count or a key=value", value, f)
			}
			count = n
		case key == "device":
			devices = strings.Split(val, ",")
		}
	}
	if devices == nil {
		if count < 0 || count > len(gpus) {
			count = len(gpus)
		}
		return gpus[:count], nil
	}
	var out []Device
	for _, id := range devices {
		id = strings.TrimSpace(id)
		if i, err := strconv.Atoi(id); err == nil {
			if i < 0 || i >= len(gpus) {
				return nil, fmt.Errorf("--gpus device=%s: this host has %d NVIDIA GPU(s)", id, len(gpus))
			}
			out = append(out, gpus[i])
			continue
		}
		bdf, ok := uuids[id]
		found := false
		for _, g := range gpus {
			if ok && g.BDF == bdf {
				out, found = append(out, g), true
			}
		}
		if !found {
			return nil, fmt.Errorf("--gpus device=%s: no NVIDIA GPU with that UUID (proc/driver/nvidia/gpus/*/information)", id)
		}
	}
	return out, nil
}
