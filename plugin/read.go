package plugin

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller"
	"github.com/example/webapp-operator/controller/ssa"
)

// read reads what get shows of the WebApp key: the WebApp, each child the operator declares that exists and is
// the WebApp's (controlled by its UID), and the pods each of its Deployments made.
func read(ctx context.Context, c client.Reader, key client.ObjectKey) (Snapshot, error) {
	app := &webappv2.WebApp{}
	if err := c.Get(ctx, key, app); err != nil {
		if apierrors.IsNotFound(err) {
			// A deleted WebApp may have left a claim with its data (deletionPolicy Retain), or an Orphan deletion
			// its children: said beside kubectl's NotFound, since the user will ask where the data went.
			app.Name, app.Namespace = key.Name, key.Namespace
			if s, rerr := readChildren(ctx, c, app); rerr == nil {
				gone := &goneError{error: err}
				for _, o := range s.Others {
					if o.Released {
						gone.left = append(gone.left, o)
					}
				}
				if len(gone.left) > 0 {
					return Snapshot{}, gone
				}
			}
		}
		return Snapshot{}, err
	}
	return readChildren(ctx, c, app)
}

// goneError is a WebApp's NotFound, with the objects of its name it left behind (released).
type goneError struct {
	error
	left []Other
}

func (e *goneError) Unwrap() error { return e.error }

// Hint is what goes under the error: each object left behind, and what to do with it.
func (e *goneError) Hint() string {
	var b strings.Builder
	for _, o := range e.left {
		fmt.Fprintf(&b, "%s %s/%s is still there (%s): %s\n", kindOf(o.Object), o.Object.GetNamespace(), o.Object.GetName(), childState(o.Object), o.Why)
	}
	return b.String()
}

// readChildren reads app's children and pods.
func readChildren(ctx context.Context, c client.Reader, app *webappv2.WebApp) (Snapshot, error) {
	s := Snapshot{App: app, Pods: map[string][]*corev1.Pod{}}
	for _, obj := range controller.ChildObjects(app) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		switch {
		case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
			// Not there, or its API not served here (the Gateway API): nothing to show.
			continue
		case err != nil:
			return s, fmt.Errorf("reading %s %s: %w", kindOf(obj), obj.GetName(), err)
		}
		if !controlledBy(obj, app) {
			// Of the WebApp's name but not its own: released (kept), or someone else's, which holds the WebApp.
			s.Others = append(s.Others, Other{Object: obj, Released: released(obj, app), Why: notOwnWhy(obj, app)})
			continue
		}
		s.Children = append(s.Children, obj)
		if dep, ok := obj.(*appsv1.Deployment); ok {
			podList, err := controller.OwnedPods(ctx, c, app, dep)
			if err != nil {
				return s, err
			}
			s.Pods[dep.Name] = podList
		}
	}
	return s, nil
}

// controlledBy: obj's controller is app.
func controlledBy(obj client.Object, app *webappv2.WebApp) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			return ref.UID == app.UID
		}
	}
	return false
}

// released: obj, not controlled by app, is one the operator let go (it still carries our managed-by label and no
// controller): a claim kept with its data, or a child of an Orphan deletion. A WebApp of its name takes it up again.
func released(obj client.Object, app *webappv2.WebApp) bool {
	return metav1.GetControllerOf(obj) == nil && ssa.NotOursReason(obj, app) == ""
}

// notOwnWhy says, in the operator's words, why obj is not app's and what follows.
func notOwnWhy(obj client.Object, app *webappv2.WebApp) string {
	if released(obj, app) {
		if _, ok := obj.(*corev1.PersistentVolumeClaim); ok {
			return "released by the WebApp and kept with its data; a WebApp of this name with a claim volume mounts it again, or delete it to free the data"
		}
		return "released by the WebApp (no owner reference to it); a WebApp of this name takes it up again"
	}
	return "not the WebApp's: it " + ssa.NotOursReason(obj, app) + "; the operator never takes it over"
}
