package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/homelab-dev/homelab/infra/clusterlock"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/inventory"
)

// addBreakLockFlag is --break-lock, for every command that changes the
// cluster.
func addBreakLockFlag(cmd *cobra.Command, breakLock *bool) {
	cmd.Flags().BoolVar(breakLock, "break-lock", false, "take the cluster lock from the run holding it (named when this command is refused): only when that run is gone, its process killed or its machine lost")
}

// withClusterLock runs fn holding the cluster lock (infra/clusterlock),
// or refuses, naming the run that holds it. The lock goes back even when
// fn fails or the run is interrupted.
func withClusterLock(ctx context.Context, cmd *cobra.Command, inv *inventory.Inventory, o clusterlock.Options, fn func() error) error {
	key, err := inv.SSH.ReadPrivateKey()
	if err != nil {
		return err
	}
	t := clusterlock.Target{Inventory: inv, PrivateKey: key, KnownHosts: inv.SSH.KnownHosts, Dial: ssh.DialFunc(dialer()), CommandLog: commandLog()}
	nodes := clusterlock.Connect(ctx, t)
	me := clusterlock.Me(runCommand())
	o.Warn = func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+s) }
	lock, err := clusterlock.Take(ctx, nodes, me, o)
	var held *clusterlock.HeldError
	if errors.As(err, &held) && held.Holder.GoneHere() {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: the cluster lock's holder, %s, ran on this machine and is gone: taking the lock over\n", held.Holder)
		o.Break = true
		lock, err = clusterlock.Take(ctx, nodes, me, o)
	}
	clusterlock.Close(nodes)
	if err != nil {
		return err
	}
	defer func() {
		nodes := clusterlock.Connect(context.WithoutCancel(ctx), t)
		defer clusterlock.Close(nodes)
		if err := lock.Release(ctx, nodes); err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v\n", err)
		}
	}()
	return fn()
}

// runCommand is this run as the holder record shows it: the command line
// (no secret ever travels in homelab's arguments) and where it ran.
func runCommand() string {
	wd, _ := os.Getwd()
	return filepath.Base(os.Args[0]) + " " + strings.Join(os.Args[1:], " ") + " (in " + wd + ")"
}
