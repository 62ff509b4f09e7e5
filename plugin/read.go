package plugin

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller"
)

// read reads what get shows of the WebApp key: the WebApp, each child the operator declares that exists and is
// the WebApp's (controlled by its UID), and the pods each of its Deployments made.
func read(ctx context.Context, c client.Reader, key client.ObjectKey) (Snapshot, error) {
	app := &webappv2.WebApp{}
	if err := c.Get(ctx, key, app); err != nil {
		return Snapshot{}, err
	}
	return readChildren(ctx, c, app)
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
