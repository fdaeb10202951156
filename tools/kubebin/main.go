// Command kubebin is one binary holding the control-plane programs the ftspark
// test suite and `make demo` need: kube-apiserver, kube-scheduler,
// kube-controller-manager, kubectl, etcd, and for real nodes kubelet and
// kube-proxy. It is a test/dev tool and is never shipped. The program to run is chosen by the first argument or, when the
// binary is reached through a symlink, by the symlink's name (busybox style).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

var programs = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kubectl":                 kubectl.NewDefaultKubectlCommand,
	// The real-node tier: one kubelet per node, one kube-proxy for the machine.
	"kubelet":    func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
	"kube-proxy": proxy.NewProxyCommand,
}

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if name == "kubebin" {
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, "usage: kubebin {etcd|kube-apiserver|kube-scheduler|kube-controller-manager|kubectl|kubelet|kube-proxy} [flags]")
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	if name == "etcd" {
		etcdmain.Main(append([]string{"etcd"}, args...))
		return
	}
	newCommand, ok := programs[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "kubebin: unknown program %q\n", name)
		os.Exit(2)
	}
	cmd := newCommand()
	cmd.SetArgs(args)
	os.Exit(cli.Run(cmd))
}
