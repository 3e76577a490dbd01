package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/homelab-dev/homelab/infra/adopt"
	"github.com/homelab-dev/homelab/infra/clusterlock"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/infra/stack"
	"github.com/homelab-dev/homelab/roles/pki"
)

func init() {
	subcommands = append(subcommands, newAdoptCommand)
}

func newAdoptCommand() *cobra.Command {
	var f stackFlags
	var from string
	var yes, force, breakLock bool
	cmd := &cobra.Command{
		Use:   "adopt -f FILE [--from NODE] [--yes]",
		Short: "Take over a cluster kubeadm already built: its PKI into the secrets bundle, a comparison with the inventory, the first preview as the plan",
		Long: "Reads the cluster's CAs and service-account key from a control-plane node (--from, default the first that has them) into the " +
			"secrets bundle where up looks for it, keeping keepalived's VRRP password and an existing secretbox encryption key; compares " +
			"the Nodes, etcd members, controlPlaneEndpoint and API certificate SANs with the inventory; marks every node kubeadm fully set up " +
			"as complete, so up adopts it instead of resetting it; then previews the first up. It writes the bundle and the markers, nothing else.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			inv, err := loadInventory(f.inventory, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			key, err := inv.SSH.ReadPrivateKey()
			if err != nil {
				return err
			}
			ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			start := time.Now()
			a, err := adopt.Prepare(ctx, adopt.Target{Inventory: inv, PrivateKey: key,
				KnownHosts: inv.SSH.KnownHosts, From: from, Dial: ssh.DialFunc(dialer()), CommandLog: commandLog()})
			if err != nil {
				return err
			}
			defer a.Close()
			fmt.Fprintf(out, "read the cluster's PKI from %s (etcd cluster %x, %d Nodes, %d etcd members)\n\n",
				a.Live.Source, a.Live.EtcdClusterID, len(a.Live.APINodes), len(a.Live.Members))
			adopt.WriteTable(out, a.Checks)
			fmt.Fprintln(out)
			if len(a.Kept) > 0 {
				fmt.Fprintf(out, "the bundle keeps the cluster's own: %s\n", strings.Join(a.Kept, "; "))
			}

			stackName := f.stack
			if stackName == "" {
				stackName = inv.Cluster.Name
			}
			path := f.secrets
			if path == "" {
				path = stack.BundlePath(f.stateDir, stackName)
			}
			writeBundle, err := checkExistingBundle(path, a, force)
			if err != nil {
				return err
			}
			var marks []string
			for _, p := range a.Plan {
				if p.NeedsMarker() {
					marks = append(marks, p.Node+":"+p.Marker)
				}
			}
			if writeBundle {
				fmt.Fprintf(out, "adopt writes the secrets bundle %s (0600)\n", path)
			} else {
				fmt.Fprintf(out, "%s already holds this cluster's bundle: kept as it is\n", path)
			}
			if len(marks) > 0 {
				fmt.Fprintf(out, "adopt writes %d completion marker(s): %s\n", len(marks), strings.Join(marks, ", "))
			}
			if (writeBundle || len(marks) > 0) && !yes {
				if !ttyStdin() {
					return fmt.Errorf("nothing written: pass --yes to write the bundle and the markers above (or run on a terminal to confirm)")
				}
				fmt.Fprint(out, "Write them? Type yes: ")
				answer, _ := bufio.NewReader(os.Stdin).ReadString('\n')
				if strings.TrimSpace(answer) != "yes" {
					return fmt.Errorf("not confirmed: nothing written")
				}
			}
			write := func() error {
				if writeBundle {
					if _, err := stack.WriteBundle(path, a.Bundle); err != nil {
						return err
					}
					fmt.Fprintf(out, "wrote %s (0600): back it up, it is the cluster's root of trust\n", path)
				}
				return a.Mark(ctx, out)
			}
			if writeBundle || len(marks) > 0 {
				if err := withClusterLock(ctx, cmd, inv, clusterlock.Options{Break: breakLock}, write); err != nil {
					return err
				}
			}
			a.Close()

			s, err := stack.Open(ctx, stack.Options{Inventory: f.inventory, Secrets: f.secrets, StateDir: f.stateDir, Backend: f.state, Stack: f.stack, Progress: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			changes, err := s.PreviewChanges(ctx, true)
			if err != nil {
				return fmt.Errorf("preview: %w", err)
			}
			fmt.Fprintf(out, "\nthe first up's plan (%d change(s)):\n", len(changes))
			for _, c := range changes {
				fmt.Fprintf(out, "  %s\n", c)
			}
			fmt.Fprintf(out, "\n%s\n", adopt.PlanSummary(changes, a.Plan))
			fmt.Fprintf(out, "adopt took %s; next: homelab up -f %s\n", time.Since(start).Round(time.Millisecond), f.inventory)
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&from, "from", "", "control-plane node to read the PKI, admin.conf and etcd through (default: the first that has the CA key)")
	cmd.Flags().BoolVar(&yes, "yes", false, "write the bundle and the markers without asking")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing secrets bundle that holds another cluster's CAs")
	addBreakLockFlag(cmd, &breakLock)
	return cmd
}

// ttyStdin reports whether stdin is a terminal (a character device such as
// /dev/null is not one).
func ttyStdin() bool {
	_, err := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS)
	return err == nil
}

// checkExistingBundle decides whether the bundle is written: not when the
// file already holds this cluster's (same CAs, same kept secrets); an
// error when it holds anything else, unless force.
func checkExistingBundle(path string, a *adopt.Adoption, force bool) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	old, perr := pki.Parse(data)
	if perr == nil && a.Holds(old) {
		a.Bundle = old
		return false, nil
	}
	if force {
		return true, nil
	}
	why := "another cluster's CAs or secrets"
	if perr != nil {
		why = "no valid bundle (" + perr.Error() + ")"
	}
	return false, fmt.Errorf("%s exists and holds %s: refusing to overwrite it; back it up and pass --force to replace it with this cluster's", path, why)
}
