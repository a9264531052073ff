// Command elfcheck checks that executables are static Linux ELF binaries
// for one architecture: what a managed plugin's rootfs (no libc, no loader)
// and a release's binaries must be. It exits 1 naming each file that is not.
//
//	go run ./tools/elfcheck -arch arm64 FILE...
package main

import (
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"os"
)

// machines are the architectures a release is built for, by GOARCH.
var machines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}

func main() {
	arch := flag.String("arch", "", "the GOARCH every file must be built for: amd64 or arm64")
	flag.Parse()
	if _, ok := machines[*arch]; !ok || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: elfcheck -arch amd64|arm64 FILE...")
		os.Exit(2)
	}
	bad := false
	for _, f := range flag.Args() {
		if err := check(f, *arch); err != nil {
			fmt.Fprintf(os.Stderr, "elfcheck: %s: %v\n", f, err)
			bad = true
			continue
		}
		fmt.Printf("%s: static ELF, linux/%s\n", f, *arch)
	}
	if bad {
		os.Exit(1)
	}
}

// check reports why path is not a static executable for arch.
func check(path, arch string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 {
		return fmt.Errorf("class %v, want ELFCLASS64", f.Class)
	}
	if f.Machine != machines[arch] {
		return fmt.Errorf("machine %v, want %v (%s)", f.Machine, machines[arch], arch)
	}
	if f.Type != elf.ET_EXEC {
		return fmt.Errorf("type %v, want ET_EXEC (a static, non-PIE executable)", f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("has a program interpreter (dynamically linked): a plugin rootfs has no loader")
		}
		if p.Type == elf.PT_DYNAMIC {
			return errors.New("has a dynamic section (dynamically linked)")
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		return fmt.Errorf("needs shared libraries %v", libs)
	}
	return nil
}
