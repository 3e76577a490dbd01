package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/homelab-dev/homelab/cmd/internal/command"
	"github.com/homelab-dev/homelab/infra/hostkeys"
	"github.com/homelab-dev/homelab/inventory"
)

func init() {
	subcommands = append(subcommands, newHostsCommand)
}

func newHostsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hosts",
		Short: "Manage the SSH host keys homelab trusts (known_hosts)",
	}
	var path, fingerprint string
	accept := &cobra.Command{
		Use:   "accept NODE -f FILE",
		Short: "Trust the key a node shows now, after you compared its fingerprint out of band (a reinstalled or replaced machine)",
		Long: "Connects to the node's declared address, shows the fingerprint of the host key it presents next to the ones known_hosts has, " +
			"and replaces the node's known_hosts entries (by address and by name) with it once you confirm: interactively, " +
			"or with --fingerprint set to the fingerprint you verified on the machine (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub). " +
			"Nothing is accepted silently.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			inv, err := loadInventory(path, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			n, ok := inv.Node(args[0])
			if !ok {
				return fmt.Errorf("no node %q in %s", args[0], path)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			return acceptHostKey(ctx, cmd, inv, n, fingerprint)
		},
	}
	command.FileFlag(accept, &path)
	accept.Flags().StringVar(&fingerprint, "fingerprint", "", "the SHA256 fingerprint you verified on the machine; required when not on a terminal")
	cmd.AddCommand(accept)
	return cmd
}

func acceptHostKey(ctx context.Context, cmd *cobra.Command, inv *inventory.Inventory, n inventory.Node, fingerprint string) error {
	port := inv.SSH.Port
	if port == 0 {
		port = 22
	}
	addr := net.JoinHostPort(n.Address, strconv.Itoa(port))
	file := inv.SSH.KnownHosts
	hosts := hostkeys.Hosts(n.Name, n.Address, port)
	out := cmd.OutOrStdout()
	show := func(s hostkeys.Shown) {
		fmt.Fprintf(out, "%s (%s) shows %s key %s\n", n.Name, addr, s.Key.Type(), s.Fingerprint)
		if len(s.Known) == 0 {
			fmt.Fprintf(out, "%s has no key for it yet\n", file)
		} else {
			fmt.Fprintf(out, "%s has %s\n", file, strings.Join(s.Known, ", "))
		}
	}
	confirm := func(s hostkeys.Shown) error {
		show(s)
		switch {
		case fingerprint != "":
			return hostkeys.MatchFingerprint(fingerprint)(s)
		case term.IsTerminal(int(os.Stdin.Fd())):
			fmt.Fprintf(out, "Compare it with the machine's own (on its console: ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub).\nTrust this key for %s? Type yes: ", n.Name)
			answer, _ := bufio.NewReader(os.Stdin).ReadString('\n')
			if strings.TrimSpace(answer) != "yes" {
				return fmt.Errorf("not accepted")
			}
			return nil
		default:
			return fmt.Errorf("refusing to accept a host key without confirmation: run on a terminal, or pass --fingerprint %s after checking it on the machine", s.Fingerprint)
		}
	}
	s, err := hostkeys.Accept(ctx, hostkeys.DialFunc(dialer()), file, hosts, addr, confirm)
	if err != nil {
		return err
	}
	if s.Trusted() {
		show(s)
		fmt.Fprintln(out, "already trusted: nothing to do")
		return nil
	}
	fmt.Fprintf(out, "%s now trusts %s for %s (%s)\n", file, s.Fingerprint, n.Name, strings.Join(hosts, ", "))
	return nil
}
