package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	webappv1 "github.com/example/webapp-operator/apis/v1"
)

// configRefIndex indexes WebApps by the ConfigMaps and Secrets their environment refers to ("configmap/NAME",
// "secret/NAME"), so a change to one finds the WebApps to roll.
const configRefIndex = "webapp.example.com/config-refs"

// configRefs lists the ConfigMaps and Secrets app's env and envFrom refer to, as "configmap/NAME" and
// "secret/NAME", sorted and without repeats.
func configRefs(app *webappv1.WebApp) []string {
	var refs []string
	for _, e := range app.Spec.Env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			refs = append(refs, "configmap/"+r.Name)
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			refs = append(refs, "secret/"+r.Name)
		}
	}
	for _, e := range app.Spec.EnvFrom {
		if e.ConfigMapRef != nil {
			refs = append(refs, "configmap/"+e.ConfigMapRef.Name)
		}
		if e.SecretRef != nil {
			refs = append(refs, "secret/"+e.SecretRef.Name)
		}
	}
	sort.Strings(refs)
	return slices.Compact(refs)
}

// indexConfigRefs is the indexer function of configRefIndex.
func indexConfigRefs(o client.Object) []string {
	return configRefs(o.(*webappv1.WebApp))
}

// configHash hashes the data of the ConfigMaps and Secrets app refers to, read from the API server (they are not
// cached: only their metadata is watched). A missing one hashes as missing, so its creation rolls the pods too.
// "" when app refers to none.
func (r *WebAppReconciler) configHash(ctx context.Context, app *webappv1.WebApp) (string, error) {
	refs := configRefs(app)
	if len(refs) == 0 {
		return "", nil
	}
	h := sha256.New()
	for _, ref := range refs {
		var data map[string][]byte
		kind, name, _ := strings.Cut(ref, "/")
		key := types.NamespacedName{Namespace: app.Namespace, Name: name}
		var err error
		if kind == "configmap" {
			cm := &corev1.ConfigMap{}
			if err = r.reader().Get(ctx, key, cm); err == nil {
				data = map[string][]byte{}
				for k, v := range cm.Data {
					data[k] = []byte(v)
				}
				for k, v := range cm.BinaryData {
					data["binary:"+k] = v
				}
			}
		} else {
			s := &corev1.Secret{}
			if err = r.reader().Get(ctx, key, s); err == nil {
				data = s.Data
			}
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("reading %s for the config hash: %w", ref, err)
		}
		// Length-prefixed, in key order: no two different contents hash the same way by concatenation.
		_, _ = fmt.Fprintf(h, "%d:%s;%t;", len(ref), ref, data != nil)
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			_, _ = fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(data[k]))
			_, _ = h.Write(data[k])
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// webAppsReferring maps a ConfigMap or Secret to the WebApps of its namespace whose environment refers to it.
func (r *WebAppReconciler) webAppsReferring(kind string) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &webappv1.WebAppList{}
		if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{configRefIndex: kind + "/" + o.GetName()}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, app := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: app.Namespace, Name: app.Name}})
		}
		return reqs
	}
}
