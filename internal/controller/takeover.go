package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockedcron/lockedcron/api/v1alpha1"
	"github.com/lockedcron/lockedcron/internal/runpod"
)

// caughtUpRetry is how soon a job's pass held back by caughtUp is tried again; listRetry
// how soon the lists are read again after they failed.
const (
	caughtUpRetry = 200 * time.Millisecond
	listRetry     = 2 * time.Second
)

// caughtUp holds back a new leader's passes until its caches show what the leaders before
// it wrote.
//
// controller-runtime starts a manager's caches before it is elected (kube-controller-
// manager starts its informers after), so a standby that takes over plans from caches
// that the old leader's last writes may not have reached yet, and decided (deferral.go),
// which covers a manager's own writes, is empty in it. An occurrence the old leader
// counted missed, in a status write the new leader's job cache is behind, would get a pod
// from the new leader and be counted twice (missed, then its run); one whose pod the old
// leader created, in a pod cache that is behind, could be counted missed while that pod
// runs it.
//
// So, at its first pass, the new leader lists (a quorum read, metadata only) the jobs and
// the job pods of the namespaces it acts in: everything the leaders before it wrote. A job
// is reconciled once its cached version is the listed one (or a read of the job says the
// cache is current: it changed since), and each pod listed for it is in the pod cache (or
// is gone); until then its passes are put off for a moment. That is two lists per
// namespace set, once per leadership (a manager that loses its lease exits), and a read
// for a job or pod that changed meanwhile.
type caughtUp struct {
	// namespaces are those the manager acts in (--watch-namespaces); none: all.
	namespaces []string

	mu     sync.Mutex
	listed bool
	// failed is when the lists last failed, and why: every job's pass waits for them, and
	// while the API server fails each would list again (a storm of pages when it can least
	// take it), so for listRetry they fail at once instead.
	failed    time.Time
	failedErr error
	jobs      map[types.NamespacedName]string   // resourceVersion at the list
	pods      map[types.NamespacedName][]string // the job's pods at the list
}

// wait reports whether job's pass must wait for the caches (the job as cached, its pods
// as the cache lists them), listing the API server's state first if not done yet.
func (c *caughtUp) wait(ctx context.Context, api client.Reader, job *v1alpha1.LockedCronJob, cached []corev1.Pod) (bool, error) {
	key := types.NamespacedName{Namespace: job.Namespace, Name: job.Name}
	c.mu.Lock()
	if !c.listed {
		if !c.failed.IsZero() && time.Since(c.failed) < listRetry {
			err := c.failedErr
			c.mu.Unlock()
			return false, err
		}
		if err := c.list(ctx, api); err != nil {
			c.failed, c.failedErr = time.Now(), err
			c.mu.Unlock()
			return false, err
		}
	}
	rv, listed := c.jobs[key]
	podNames := c.pods[key]
	c.mu.Unlock()
	if !listed {
		return false, nil // caught up before, or made after the list: the cache has it
	}
	if job.ResourceVersion != rv {
		var live metav1.PartialObjectMetadata
		live.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("LockedCronJob"))
		if err := api.Get(ctx, key, &live); err != nil {
			if apierrors.IsNotFound(err) {
				return true, nil // deleted: the cache will say so
			}
			return false, err
		}
		if live.ResourceVersion != job.ResourceVersion {
			return true, nil
		}
	}
	have := make(map[string]bool, len(cached))
	for i := range cached {
		have[cached[i].Name] = true
	}
	for _, name := range podNames {
		if have[name] {
			continue
		}
		var live metav1.PartialObjectMetadata
		live.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
		err := api.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: name}, &live)
		switch {
		case apierrors.IsNotFound(err):
			continue // gone since the list
		case err != nil:
			return false, err
		default:
			if owner, ok := ownerJob(&live); ok && owner == job.Name {
				return true, nil // the pod cache has not seen it yet
			}
		}
	}
	c.mu.Lock()
	delete(c.jobs, key)
	delete(c.pods, key)
	c.mu.Unlock()
	return false, nil
}

// list reads the jobs and job pods of c's namespaces from the API server. c.mu is held.
func (c *caughtUp) list(ctx context.Context, api client.Reader) error {
	jobs := map[types.NamespacedName]string{}
	pods := map[types.NamespacedName][]string{}
	namespaces := c.namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, ns := range namespaces {
		err := listPages(ctx, api, v1alpha1.GroupVersion.WithKind("LockedCronJobList"), []client.ListOption{client.InNamespace(ns)},
			func(j *metav1.PartialObjectMetadata) {
				jobs[types.NamespacedName{Namespace: j.Namespace, Name: j.Name}] = j.ResourceVersion
			})
		if err != nil {
			return fmt.Errorf("listing LockedCronJobs to see the caches catch up after election: %w", err)
		}
		err = listPages(ctx, api, corev1.SchemeGroupVersion.WithKind("PodList"), []client.ListOption{client.InNamespace(ns), client.HasLabels{runpod.LabelJob}},
			func(p *metav1.PartialObjectMetadata) {
				// A job's pods as a pass lists them: those it controls (the owner index).
				if name, ok := ownerJob(p); ok {
					key := types.NamespacedName{Namespace: p.Namespace, Name: name}
					pods[key] = append(pods[key], p.Name)
				}
			})
		if err != nil {
			return fmt.Errorf("listing job pods to see the caches catch up after election: %w", err)
		}
	}
	c.jobs, c.pods, c.listed = jobs, pods, true
	return nil
}

// listPageSize bounds what one page of listPages holds (the objects' metadata, their
// managed fields included: about 2 KB each).
const listPageSize = 500

// listPages lists the metadata of gvk's objects a page at a time (one consistent list: the
// pages after the first are read at the first's resourceVersion), calling each for each.
func listPages(ctx context.Context, api client.Reader, gvk schema.GroupVersionKind, opts []client.ListOption, each func(*metav1.PartialObjectMetadata)) error {
	cont := ""
	for {
		page := &metav1.PartialObjectMetadataList{} // a fresh one: a decode leaves alone what the answer omits
		page.SetGroupVersionKind(gvk)
		o := append(opts[:len(opts):len(opts)], client.Limit(listPageSize))
		if cont != "" {
			o = append(o, client.Continue(cont))
		}
		if err := api.List(ctx, page, o...); err != nil {
			return err
		}
		for i := range page.Items {
			each(&page.Items[i])
		}
		if cont = page.Continue; cont == "" {
			return nil
		}
	}
}
