// Package integration tests the reconciler against a real kube-apiserver and etcd (envtest): Server-Side Apply
// ownership, conflicts, drift repair, CRD validation and the zero-write rule only exist there.
package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/example/webapp-operator/controller"
	"github.com/example/webapp-operator/test/cluster"
	operatorpkg "github.com/example/webapp-operator/test/operator"
	"github.com/example/webapp-operator/test/testutil"
)

var (
	cfg    *rest.Config  // admin config of the test API server
	opCfg  *rest.Config  // the operator's config: a user with only the generated ClusterRole
	k8s    client.Client // the tests' own client (its requests are not counted)
	logDir string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	logDir, err = os.MkdirTemp("", "webapp-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(mustLog(filepath.Join(logDir, "operator.log"))), zap.UseDevMode(true), zap.Level(zapcore.Level(-2))))
	env, err := cluster.NewEnvtest(logDir, true)
	if err != nil {
		fmt.Fprintf(os.Stderr, "configuring the test API server: %v\n", err)
		return 1
	}
	if cfg, err = env.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "starting the test API server: %v (logs in %s)\n", err, logDir)
		_ = env.Stop()
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the test API server: %v\n", err)
		}
	}()
	testEnv = env
	if err := startConversion(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { stopConversion() }()
	k8s, err = client.New(cfg, client.Options{Scheme: controller.NewScheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if opCfg, err = operatorUser(env); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "integration tests failed; API server, etcd and operator logs are in %s\n", logDir)
	}
	return code
}

// operatorUser creates a user bound to nothing but the ClusterRole that `make generate` writes from the RBAC
// markers (manifests/rbac/role.yaml), so every test also proves that role is enough.
func operatorUser(env *envtest.Environment) (*rest.Config, error) {
	data, err := os.ReadFile(filepath.Join(cluster.RepoRoot(), "manifests", "rbac", "role.yaml"))
	if err != nil {
		return nil, err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(data, role); err != nil {
		return nil, fmt.Errorf("decoding role.yaml: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "webapp-operator"}},
	}
	ctx := context.Background()
	if err := k8s.Create(ctx, role); err != nil {
		return nil, err
	}
	if err := k8s.Create(ctx, binding); err != nil {
		return nil, err
	}
	user, err := env.AddUser(envtest.User{Name: "webapp-operator"}, nil)
	if err != nil {
		return nil, err
	}
	return user.Config(), nil
}

func mustLog(path string) *os.File {
	f, err := os.Create(path)
	if err != nil {
		panic(err)
	}
	return f
}

// writeCounter counts the write requests (anything but GET, LIST and WATCH) a client sends, by method and path,
// and, apart, its GETs of single ConfigMaps and Secrets (the uncached reads of the config hash).
type writeCounter struct {
	mu          sync.Mutex
	seen        []string
	configReads []string
	applied     map[string][]byte // the body of the last apply, by path
}

// lastApply is the body of the last apply sent to path.
func (w *writeCounter) lastApply(path string) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.applied[path]
}

// wrap is a rest.Config WrapTransport: every client built from the config counts into w.
func (w *writeCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return operatorpkg.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		isConfig := strings.Contains(req.URL.Path, "/configmaps/") || strings.Contains(req.URL.Path, "/secrets/")
		w.mu.Lock()
		switch {
		case req.Method != http.MethodGet && req.Method != http.MethodHead:
			w.seen = append(w.seen, req.Method+" "+req.URL.Path)
			if req.Header.Get("Content-Type") == string(types.ApplyYAMLPatchType) && req.GetBody != nil {
				if body, err := req.GetBody(); err == nil {
					data, _ := io.ReadAll(body)
					if w.applied == nil {
						w.applied = map[string][]byte{}
					}
					w.applied[req.URL.Path] = data
				}
			}
		case isConfig && req.URL.Query().Get("watch") == "":
			w.configReads = append(w.configReads, req.URL.Path)
		}
		w.mu.Unlock()
		return next.RoundTrip(req)
	})
}

// takeConfigReads returns the ConfigMap and Secret GETs seen so far and forgets them.
func (w *writeCounter) takeConfigReads() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.configReads
	w.configReads = nil
	return s
}

// snapshot returns the writes seen so far (since the last take).
func (w *writeCounter) snapshot() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

// take returns the writes seen so far and forgets them.
func (w *writeCounter) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.seen
	w.seen = nil
	return s
}

// operator is a running manager with the WebApp controller, watching one namespace.
type operator struct {
	writes *writeCounter
	stop   func() // stops the manager and waits for it; idempotent
}

// operatorOptions change how startOperatorWith runs the operator.
type operatorOptions struct {
	workers int                                // MaxConcurrentReconciles (1 when zero)
	fault   func(*http.Request) *http.Response // when it returns a response, the request never reaches the server
	// allNamespaces: the operator watches every namespace, as the manifests install it (one store per kind, read in
	// place), not only ns (a store per namespace, read through the cache).
	allNamespaces bool
}

// startOperator runs the operator's manager, as main.go builds it, for namespace ns until the test ends. Its
// requests go through a writeCounter.
func startOperator(t *testing.T, ns string, requeueAfter time.Duration) *operator {
	t.Helper()
	return startOperatorWith(t, ns, requeueAfter, operatorOptions{})
}

func startOperatorWith(t *testing.T, ns string, requeueAfter time.Duration, o operatorOptions) *operator {
	t.Helper()
	op := &operator{writes: &writeCounter{}}
	if o.allNamespaces {
		ns = ""
	}
	op.stop = operatorpkg.Run(t, opCfg, operatorpkg.Options{Namespace: ns, Requeue: requeueAfter, Workers: o.workers,
		Wrap: func(next http.RoundTripper) http.RoundTripper {
			counted := op.writes.wrap(next)
			if o.fault == nil {
				return counted
			}
			return operatorpkg.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
				if resp := o.fault(req); resp != nil {
					return resp, nil
				}
				return counted.RoundTrip(req)
			})
		}})
	return op
}

// restartCostsNoWrites waits until op is at rest (a resync of every WebApp with no write: a write still in flight
// when it stops would be cancelled, and rightly sent again by the next operator), stops it, starts a fresh operator
// for ns (it remembers nothing), and fails the test if that one sends any write request, refused ones included, over
// three resyncs. It returns the new operator.
func restartCostsNoWrites(t *testing.T, op *operator, ns string) *operator {
	t.Helper()
	testutil.Eventually(t, time.Minute, "the operator at rest before its restart", func(context.Context) error {
		op.writes.take()
		waitResyncs(t, 1, 30*time.Second)
		if w := op.writes.take(); len(w) != 0 {
			return fmt.Errorf("it still writes: %q", w)
		}
		return nil
	})
	op.stop()
	second := startOperator(t, ns, time.Second)
	waitResyncs(t, 3, 30*time.Second)
	if w := second.writes.take(); len(w) != 0 {
		t.Errorf("%d write requests after a restart (refused ones count): %q", len(w), w)
	}
	return second
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "it-" + strings.ToLower(rand.String(6))}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// reconcileCount is how many reconciles the webapp controllers of this process have finished, from
// controller-runtime's own metric.
func reconcileCount(t *testing.T) float64 {
	t.Helper()
	return metricSum(t, "controller_runtime_reconcile_total", map[string]string{"controller": "webapp"})
}

// waitResyncs waits until the resync loops of this process have walked the cached WebApps n more times (see
// operator.WaitResyncs).
func waitResyncs(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	operatorpkg.WaitResyncs(t, n, timeout)
}

// metricSum is the sum of the samples of metric name with labels in the metrics registry of this process.
func metricSum(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return operatorpkg.MetricSum(t, name, labels)
}

var (
	// testEnv is the suite's API server; stopConversion stops the conversion webhook this process serves for it
	// (startConversion starts it again).
	testEnv        *envtest.Environment
	stopConversion context.CancelFunc = func() {}
)

func startConversion() error {
	ctx, cancel := context.WithCancel(context.Background())
	stopConversion = cancel
	return cluster.StartConversion(ctx, testEnv)
}
