package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller"
)

// options are the flags every command shares: kubectl's own (--kubeconfig, --context, -n, ...) by cli-runtime,
// and the output format.
type options struct {
	flags  *genericclioptions.ConfigFlags
	output string
	io     genericiooptions.IOStreams
	// newClient makes the client from the flags (tests give theirs).
	newClient func() (client.Client, error)
}

// NewCommand is kubectl-webapp's root command, writing to streams.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{flags: genericclioptions.NewConfigFlags(true), io: streams}
	o.newClient = func() (client.Client, error) {
		cfg, err := o.flags.ToRESTConfig()
		if err != nil {
			return nil, err
		}
		return client.New(cfg, client.Options{Scheme: controller.NewScheme()})
	}
	root := &cobra.Command{
		Use:           "kubectl-webapp",
		Short:         "See a WebApp, its children and pods, why it is where it is, and who owns their fields",
		SilenceErrors: true,
		SilenceUsage:  true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl webapp"},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.flags.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml (the tree or the fields as data); empty: text")
	root.AddCommand(newGetCommand(o), newExplainCommand(o), newOwnersCommand(o), newPlanCommand(o))
	root.AddCommand(newActionCommands(o)...)
	return root
}

// Main runs the command with args and returns the process's exit code: 0 done, 1 an error (said on stderr the
// way kubectl says it).
func Main(args []string, streams genericiooptions.IOStreams) int {
	cmd := NewCommand(streams)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		// Said on stderr; if stderr fails too, the exit code still says it.
		_, _ = fmt.Fprintln(streams.ErrOut, errorMessage(err))
		if gone := (*goneError)(nil); errors.As(err, &gone) {
			_, _ = io.WriteString(streams.ErrOut, gone.Hint())
		}
		return 1
	}
	return 0
}

// errorMessage is err as kubectl prints it: the server's reason for an API error, "error: " otherwise.
func errorMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Reason != "" {
		return fmt.Sprintf("Error from server (%s): %s", status.Status().Reason, err.Error())
	}
	return "error: " + err.Error()
}

// namespace is the namespace the flags and the kubeconfig's context say.
func (o *options) namespace() (string, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// clientIn is a client from the flags and the namespace they say.
func (o *options) clientIn() (client.Client, string, error) {
	c, err := o.newClient()
	if err != nil {
		return nil, "", err
	}
	ns, err := o.namespace()
	return c, ns, err
}

// snapshot reads the WebApp name of the flags' namespace, its children and pods.
func (o *options) snapshot(ctx context.Context, name string) (Snapshot, error) {
	c, ns, err := o.clientIn()
	if err != nil {
		return Snapshot{}, err
	}
	return read(ctx, c, client.ObjectKey{Namespace: ns, Name: name})
}

// print writes v as JSON or YAML when -o asks, or with text otherwise.
func (o *options) print(v any, text func(io.Writer) error) error {
	switch o.output {
	case "":
		return text(o.io.Out)
	case "json":
		b, err := json.MarshalIndent(v, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(o.io.Out, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = o.io.Out.Write(b)
		return err
	}
	return fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: json,yaml", o.output)
}

// completeWebApps completes a WebApp's name from those in the namespace.
func (o *options) completeWebApps(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, ns, err := o.clientIn()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	list := &webappv2.WebAppList{}
	if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	names := make([]string, 0, len(list.Items))
	for _, a := range list.Items {
		names = append(names, a.Name)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

func newGetCommand(o *options) *cobra.Command {
	var all, watch bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "get [NAME]",
		Short: "Show a WebApp as a tree of its children and pods, each with its state in words",
		Example: `  kubectl webapp get web              # the WebApp web of the current namespace
  kubectl webapp get -A                # every WebApp
  kubectl webapp get web --watch       # redrawn as it changes
  kubectl webapp get web -o yaml       # the tree as data`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: o.completeWebApps,
		RunE: func(cmd *cobra.Command, args []string) error {
			if all && len(args) > 0 {
				return errors.New("a resource cannot be retrieved by name across all namespaces")
			}
			c, ns, err := o.clientIn()
			if err != nil {
				return err
			}
			trees := func() ([]Node, error) { return readTrees(cmd.Context(), c, ns, all, args) }
			if !watch {
				nodes, err := trees()
				if err != nil {
					return err
				}
				return o.printTrees(nodes)
			}
			return o.watch(cmd.Context(), interval, trees)
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "Show the WebApps of every namespace")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "Redraw the tree whenever it changes")
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "With --watch: how often to read again")
	return cmd
}

// readTrees reads the WebApp named in args (or every WebApp of ns, or of all namespaces) as trees.
func readTrees(ctx context.Context, c client.Reader, ns string, all bool, args []string) ([]Node, error) {
	if len(args) == 1 {
		s, err := read(ctx, c, client.ObjectKey{Namespace: ns, Name: args[0]})
		if err != nil {
			return nil, err
		}
		return []Node{Tree(s)}, nil
	}
	list := &webappv2.WebAppList{}
	opts := []client.ListOption{}
	if !all {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	nodes := make([]Node, 0, len(list.Items))
	for i := range list.Items {
		s, err := readChildren(ctx, c, &list.Items[i])
		if err != nil {
			return nil, err
		}
		n := Tree(s)
		if all {
			n.Name = list.Items[i].Namespace + "/" + n.Name
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// printTrees writes the trees; one tree alone is printed as itself in JSON and YAML, several as a list.
func (o *options) printTrees(nodes []Node) error {
	var v any = nodes
	if len(nodes) == 1 {
		v = nodes[0]
	}
	return o.print(v, func(w io.Writer) error {
		if len(nodes) == 0 {
			_, err := fmt.Fprintln(o.io.ErrOut, "No WebApps found.")
			return err
		}
		var b strings.Builder
		for i, n := range nodes {
			if i > 0 {
				b.WriteString("\n")
			}
			if err := Render(&b, n); err != nil {
				return err
			}
		}
		_, err := io.WriteString(w, b.String())
		return err
	})
}

// watch reads the trees every interval and prints them when they changed: on a terminal the screen is redrawn
// in place, elsewhere each new state follows the last. It ends with ctx, or at the first error.
func (o *options) watch(ctx context.Context, interval time.Duration, trees func() ([]Node, error)) error {
	if ctx == nil {
		ctx = context.Background()
	}
	tty := isTerminal(o.io.Out)
	var last string
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		nodes, err := trees()
		if err != nil {
			return err
		}
		var b strings.Builder
		sub := *o
		sub.io.Out = &b
		if err := sub.printTrees(nodes); err != nil {
			return err
		}
		if now := b.String(); now != last {
			prefix := ""
			if tty {
				// Home, then clear the screen: redrawn in place.
				prefix = "\x1b[H\x1b[2J"
			} else if last != "" {
				prefix = "\n"
			}
			if _, err := io.WriteString(o.io.Out, prefix+now); err != nil {
				return err
			}
			last = now
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// isTerminal: w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newOwnersCommand(o *options) *cobra.Command {
	var child string
	cmd := &cobra.Command{
		Use:   "owners NAME",
		Short: "Show every field of a WebApp and its children with the manager that owns it, and the fields the operator shares",
		Example: `  kubectl webapp owners web                       # the WebApp and each child
  kubectl webapp owners web --child Deployment    # one kind of child (WebApp: the WebApp alone)`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeWebApps,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.snapshot(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			objs := append([]client.Object{s.App}, s.Children...)
			var out []ObjectOwners
			for _, obj := range objs {
				kind := kindOf(obj)
				if child != "" && !strings.EqualFold(child, kind) {
					continue
				}
				owners, err := Owners(kind, obj)
				if err != nil {
					return err
				}
				out = append(out, owners)
			}
			if child != "" && len(out) == 0 {
				return fmt.Errorf("WebApp %s has no child of kind %s", args[0], child)
			}
			return o.print(out, func(w io.Writer) error { return RenderOwners(w, out) })
		},
	}
	cmd.Flags().StringVar(&child, "child", "", "Only the child of this kind (Deployment, Service, ...; WebApp for the WebApp)")
	return cmd
}

func newExplainCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain NAME",
		Short: "Say why each condition of a WebApp says what it says, who sets its count, and where its traffic goes, with the evidence",
		Example: `  kubectl webapp explain web          # each statement, then the object, field and value behind it
  kubectl webapp explain web -o json  # the statements as data`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeWebApps,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.snapshot(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			statements := Explain(s, time.Now())
			return o.print(statements, func(w io.Writer) error { return RenderExplain(w, statements) })
		},
	}
	return cmd
}

func newPlanCommand(o *options) *cobra.Command {
	var file, fieldManager string
	cmd := &cobra.Command{
		Use:   "plan -f FILE",
		Short: "Say what applying a changed WebApp manifest will do, from the API server's dry runs: which fields of which children change, whether pods restart, whether a canary starts",
		Example: `  kubectl webapp plan -f web.yaml       # nothing is written
  kubectl webapp plan -f - < web.yaml    # the manifest on stdin
  kubectl webapp plan -f web.yaml -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("must specify -f FILE (a WebApp manifest; - for stdin)")
			}
			var manifest []byte
			var err error
			if file == "-" {
				manifest, err = io.ReadAll(o.io.In)
			} else {
				manifest, err = os.ReadFile(file)
			}
			if err != nil {
				return err
			}
			c, ns, err := o.clientIn()
			if err != nil {
				return err
			}
			p, err := plan(cmd.Context(), c, manifest, ns, fieldManager)
			if err != nil {
				return err
			}
			if err := o.print(p, func(w io.Writer) error { return RenderPlan(w, p) }); err != nil {
				return err
			}
			if p.Refused != "" {
				return errRefused
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "The WebApp manifest (v2) to plan; - for stdin")
	cmd.Flags().StringVar(&fieldManager, "field-manager", "kubectl", "The field manager the change will be applied with (kubectl apply --server-side's by default)")
	return cmd
}

// errRefused ends plan with exit code 1 when the API server refuses the manifest (its words are in the plan).
var errRefused = errors.New("the API server refuses the manifest")
