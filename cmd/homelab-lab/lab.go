package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/homelab-dev/homelab/cmd/internal/command"
	"github.com/homelab-dev/homelab/infra/lab"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func newRootCommand() *cobra.Command {
	var dir string
	open := func(cmd *cobra.Command) (*lab.Lab, error) {
		l, err := lab.Open(dir)
		if err != nil {
			return nil, err
		}
		l.Log = cmd.ErrOrStderr()
		return l, nil
	}
	cmd := &cobra.Command{
		Use:           "homelab-lab",
		Short:         "Run the emulated homelab: every inventory node as namespaces on this machine (root)",
		SilenceUsage:  true,
		SilenceErrors: true,
		Long: `The emulated homelab runs each inventory node as a host made of Linux
namespaces, with real sshd, keepalived, kubeadm, etcd and control-plane
binaries. Lab addresses exist only inside the lab's namespaces; reach them
with "homelab-lab ssh" and "homelab-lab exec", which is also how homelab
itself reaches them:

  homelab-lab up -f inventory/lab.yaml
  homelab-lab exec -- homelab up -f inventory/lab.yaml

homelab, the provisioner, knows nothing of the lab. See docs/lab.md.`,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", "", "lab directory (default $"+lab.EnvDir+" or "+lab.DefaultDir+")")

	var invPath string
	var standIn bool
	up := &cobra.Command{
		Use:   "up -f INVENTORY",
		Short: "Build (or reuse) the binaries and boot one node per inventory node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := open(cmd)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// Real nodes unless asked: the stand-ins go away with issue 30.
			if !standIn {
				l.Systemd = []string{"*"}
			}
			_, already, err := l.Up(ctx, invPath)
			if err != nil {
				return err
			}
			if already {
				fmt.Fprintln(cmd.OutOrStdout(), "the lab is already up:")
			}
			return printStatus(ctx, cmd.OutOrStdout(), l, true)
		},
	}
	up.Flags().StringVarP(&invPath, "file", "f", "inventory/lab.yaml", "inventory file")
	up.Flags().BoolVar(&standIn, "stand-in", false, "boot every node on the stand-ins (homelab-node's init, kubelet and CRI) instead of Debian 12 with the real systemd, containerd, runc and kubelet (docs/lab.md, \"Real nodes\")")

	var keepDisks bool
	down := &cobra.Command{
		Use:   "down [--keep-disks]",
		Short: "End every lab process and remove every namespace, link, mount and (unless kept) disk",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := open(cmd)
			if err != nil {
				return err
			}
			if err := l.Down(keepDisks); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "the lab is down")
			return nil
		},
	}
	down.Flags().BoolVar(&keepDisks, "keep-disks", false, "keep node disks, host keys and the client key for the next up")

	var asJSON bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Show each node's power, address, MAC, processes and sshd, and who holds the VIP",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := open(cmd)
			if err != nil {
				return err
			}
			if asJSON {
				st, err := l.Status(cmd.Context())
				if err != nil {
					return err
				}
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return printStatus(cmd.Context(), cmd.OutOrStdout(), l, false)
		},
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")

	ssh := &cobra.Command{
		Use:   "ssh NODE [COMMAND...]",
		Short: "Log in to a node (or run a command) with the lab's key, from the gateway namespace",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := open(cmd)
			if err != nil {
				return err
			}
			s, err := l.LoadState()
			if err != nil {
				return err
			}
			n, err := s.Node(args[0])
			if err != nil {
				return err
			}
			sshArgs := []string{"ssh", "-i", l.KeyPath(),
				"-o", "UserKnownHostsFile=" + l.LabKnownHostsPath(),
				"-o", "GlobalKnownHostsFile=/dev/null",
				"-o", "StrictHostKeyChecking=yes",
				"-o", "IdentitiesOnly=yes",
				"-o", "HostKeyAlgorithms=ssh-ed25519",
				"-p", strconv.Itoa(s.SSHPort),
				"-l", s.SSHUser}
			if len(args) == 1 && term.IsTerminal(int(os.Stdin.Fd())) {
				sshArgs = append(sshArgs, "-t")
			}
			sshArgs = append(sshArgs, n.Address)
			sshArgs = append(sshArgs, args[1:]...)
			return runInGateway(cmd, l, sshArgs)
		},
	}
	// Flags after NODE belong to the remote command.
	ssh.Flags().SetInterspersed(false)

	execCmd := &cobra.Command{
		Use:   "exec -- COMMAND...",
		Short: "Run a command in the lab's gateway namespace (kubectl, curl, ssh to lab addresses)",
		Long: `Runs COMMAND in the gateway namespace hl-gw, the only place lab addresses are
reachable from, with the lab's kubectl, kubeadm and etcdctl first on PATH:

  homelab-lab exec -- homelab up -f inventory/lab.yaml
  homelab-lab ssh cp-1 cat /etc/kubernetes/admin.conf > admin.conf
  homelab-lab exec -- kubectl --kubeconfig admin.conf get nodes`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := open(cmd)
			if err != nil {
				return err
			}
			if _, err := l.LoadState(); err != nil {
				return err
			}
			return runInGateway(cmd, l, args)
		},
	}
	execCmd.Flags().SetInterspersed(false)

	powerOff := &cobra.Command{
		Use:   "power-off NODE",
		Short: "Pull a node's plug: every process killed, its link gone (a VIP it held vanishes)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := open(cmd)
			if err != nil {
				return err
			}
			if err := l.PowerOff(args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is off\n", args[0])
			return nil
		},
	}
	powerOn := &cobra.Command{
		Use:   "power-on NODE",
		Short: "Boot a powered-off node from its disk (sshd and its enabled units start)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := open(cmd)
			if err != nil {
				return err
			}
			if err := l.PowerOn(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is on\n", args[0])
			return nil
		},
	}
	cut := &cobra.Command{
		Use:   "cut NODE",
		Short: "Pull a node's network cable: its link loses the carrier, every process keeps running (a split)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := open(cmd)
			if err != nil {
				return err
			}
			if err := l.Cut(args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is cut off\n", args[0])
			return nil
		},
	}
	uncut := &cobra.Command{
		Use:   "uncut NODE",
		Short: "Plug a cut-off node's cable back in",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := open(cmd)
			if err != nil {
				return err
			}
			if err := l.Uncut(args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is back on the network\n", args[0])
			return nil
		},
	}
	replace := &cobra.Command{
		Use:   "replace NODE",
		Short: "Swap a node's hardware: blank disk, new host key, new MAC, same name and address (the provisioner's known_hosts keeps the old key: accept the new one with homelab-lab exec -- homelab hosts accept)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := open(cmd)
			if err != nil {
				return err
			}
			if err := l.Replace(cmd.Context(), args[0]); err != nil {
				return err
			}
			if err := printStatus(cmd.Context(), cmd.OutOrStdout(), l, false); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\n%s is a new machine: %s still has its old host key, so homelab refuses it until you accept the new one\n"+
				"(its console: homelab-lab ssh %s ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub; then homelab-lab exec -- homelab hosts accept %s -f FILE --fingerprint SHA256:...)\n",
				args[0], l.KnownHostsPath(), args[0], args[0])
			return nil
		},
	}
	readdress := &cobra.Command{
		Use:   "readdress NODE ADDRESS",
		Short: "Bring a node back on another address (a changed DHCP lease); known_hosts follows",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := open(cmd)
			if err != nil {
				return err
			}
			if err := l.Readdress(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			return printStatus(cmd.Context(), cmd.OutOrStdout(), l, false)
		},
	}
	// boot is what a node's unshare runs; the lab package's init() takes
	// over before cobra when $HOMELAB_LAB_BOOT is set, so this only answers
	// a hand-made call.
	boot := &cobra.Command{
		Use:    "boot SPEC",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return lab.Boot(args[0])
		},
	}
	cmd.AddCommand(up, down, status, ssh, execCmd, powerOff, powerOn, cut, uncut, replace, readdress, boot, newDrillCommand(&dir), newBenchCommand())
	return cmd
}

// runInGateway runs argv inside the lab's gateway namespace (hl-gw for
// the default lab) with the lab's tools on PATH and passes its exit code
// through.
func runInGateway(cmd *cobra.Command, l *lab.Lab, argv []string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("entering the lab's namespace needs root (run it with sudo)")
	}
	st, err := l.LoadState()
	if err != nil {
		return err
	}
	c := exec.Command("ip", append([]string{"netns", "exec", st.Names().Gateway()}, argv...)...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
	c.Env = append(os.Environ(), "PATH="+filepath.Join(l.Dir, "tools", "usr", "bin")+":"+os.Getenv("PATH"))
	if os.Getenv("PULUMI_SKIP_UPDATE_CHECK") == "" {
		// The gateway reaches nothing off the lab: the Pulumi CLI's update
		// check could only wait for DNS.
		c.Env = append(c.Env, "PULUMI_SKIP_UPDATE_CHECK=true")
	}
	err = c.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return command.Exit(ee.ExitCode(), fmt.Errorf("%s exited with %d", argv[0], ee.ExitCode()))
	}
	return err
}

func printStatus(ctx context.Context, w io.Writer, l *lab.Lab, howTo bool) error {
	st, err := l.Status(ctx)
	if err != nil {
		return err
	}
	s := st.State
	fmt.Fprintf(w, "lab %s (inventory %s), subnet %s, gateway %s in netns %s", st.Dir, s.Inventory, s.CIDR, s.Gateway, s.Names().Gateway())
	if s.VIP != "" {
		fmt.Fprintf(w, ", VIP %s", s.VIP)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tROLE\tPOWER\tADDRESS\tMAC\tNETNS\tPID\tPROCS\tSSH\tVIP")
	for _, n := range st.Nodes {
		pid, sshOK, vip := "-", "-", ""
		if n.Unshare != nil {
			pid = strconv.Itoa(n.Unshare.PID)
		}
		if n.Power == "on" {
			sshOK = map[bool]string{true: "up", false: "DOWN"}[n.SSH]
		}
		if n.HoldsVIP {
			vip = "holds VIP"
		}
		power := n.Power
		if n.Cut {
			power += " (cut)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", n.Name, n.Role, power, n.Address, n.MAC, n.Netns, pid, n.Processes, sshOK, vip)
	}
	tw.Flush()
	if len(st.Missing) > 0 {
		fmt.Fprintf(w, "recorded but missing: %s\n", strings.Join(st.Missing, ", "))
	}
	if howTo {
		fmt.Fprintf(w, `
Reach the nodes (lab addresses exist only inside the lab's namespaces):
  homelab-lab ssh NODE [COMMAND]      e.g. homelab-lab ssh %s hostname
  homelab-lab exec -- COMMAND         runs in %s, e.g. homelab up -f FILE, kubectl, curl -k https://%s:6443/readyz
  SSH key %s, the provisioner's known_hosts %s (the lab's own: %s), user %s
  from Go: lab.Dialer (client-go rest.Config.Dial, grpc.WithContextDialer, ssh.NewClientConn)
`, st.Nodes[0].Name, s.Names().Gateway(), firstNonEmpty(s.VIP, st.Nodes[0].Address), l.KeyPath(), l.KnownHostsPath(), l.LabKnownHostsPath(), s.SSHUser)
		if s.S3Server != nil {
			fmt.Fprintf(w, `  S3 storage (the homelab's NAS) at %s, bucket %s, keys in %s (profile %s); keep the Pulumi state there:
    AWS_SHARED_CREDENTIALS_FILE=%s AWS_PROFILE=%s homelab-lab exec -- homelab up -f FILE --state '%s'
  and copy the etcd snapshots there (docs/etcd.md, "Off-site copies"), in the inventory:
    cluster: {etcd: {snapshots: {s3: {endpoint: "%s", bucket: %s, credentials: {file: %s, profile: %s}}}}}
`, lab.S3Endpoint(s), lab.S3Bucket, l.S3CredentialsPath(), lab.S3Profile, l.S3CredentialsPath(), lab.S3Profile, lab.S3StateURL(lab.S3Endpoint(s)),
				lab.S3Endpoint(s), lab.S3Bucket, l.S3CredentialsPath(), lab.S3Profile)
		}
	}
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
