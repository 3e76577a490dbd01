// Package pause stands in for the binary of the pause image
// (registry.k8s.io/pause, kubernetes/build/pause/linux/pause.c), which the
// lab's image tree holds as the homelab-node multi-call binary named
// pause. Its contract is the real one's: with an argument -v (any case) it
// prints its version and exits 0, which is all kubeadm's upgrade health
// check Job asks of it; otherwise it waits until SIGINT or SIGTERM and
// exits 0.
package pause

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

// Main runs the stand-in with the arguments after argv[0].
func Main(args []string) int {
	exe, _ := os.Executable()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	return run(os.Args[0], args, exe, os.Getpid(), os.Stdout, os.Stderr, sigs)
}

// Version is the image's tag, read from where the binary is in the image
// tree (.../registry.k8s.io/pause/3.10.1/pause), as the real binary carries
// the version it was built as.
func Version(exe string) string {
	dir := filepath.Dir(exe)
	if filepath.Base(filepath.Dir(dir)) == "pause" {
		return filepath.Base(dir)
	}
	return "homelab-standin"
}

func run(argv0 string, args []string, exe string, pid int, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	for _, a := range args {
		if strings.EqualFold(a, "-v") {
			fmt.Fprintf(stdout, "%s version: %s\n", argv0, Version(exe))
			return 0
		}
	}
	if pid != 1 {
		// Not an error: pause sees use outside of infra containers.
		fmt.Fprintln(stderr, "Warning: pause should be the first process")
	}
	sig := <-sigs
	desc := "Terminated"
	if sig == syscall.SIGINT {
		desc = "Interrupt"
	}
	fmt.Fprintf(stderr, "Shutting down, got signal: %s\n", desc)
	return 0
}
