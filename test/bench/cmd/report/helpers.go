package main

import (
	"fmt"
	"sort"
	"strconv"
)

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

var engineOrder = []string{"debian", "current"}

// engines returns the engines m has samples of, in engineOrder.
func engines[T any](m map[string][]T) []string {
	var out []string
	for _, e := range engineOrder {
		if len(m[e]) > 0 {
			out = append(out, e)
		}
	}
	return out
}

// engineLabel names the engines as scripts/engines.sh provides them.
var engineLabel = map[string]string{"debian": "Debian's Docker", "current": "moby"}

func engineName(d *data, e string) string {
	if v := d.machine["engine_"+e]; v != "" {
		return fmt.Sprintf("%s (%s %s)", e, engineLabel[e], v)
	}
	return e
}

var pluginOps = []string{"create", "join", "leave", "delete"}

var opNames = map[string]string{
	"create": "CreateEndpoint", "join": "Join", "leave": "Leave", "delete": "DeleteEndpoint",
	"plugin": "the four calls", "move": "move into netns", "moveback": "move back", "cycle": "whole cycle",
	"kadd": "kernel: add macvlan", "kdel": "kernel: delete macvlan",
}

func sortedKeys(m map[int]map[string][]float64) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

func mapStr(xs []int, f func(int) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}
