package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// stuckClose is a client whose Close waits until the test ends: a TLS close to a peer
// that does not read waits up to 5 s for its alert to go out.
type stuckClose struct {
	redis.UniversalClient
	closing chan struct{}
	once    *sync.Once
	release <-chan struct{}
}

func (c stuckClose) Close() error {
	c.once.Do(func() { close(c.closing) })
	<-c.release
	return c.UniversalClient.Close()
}

// TestChangedSecretClosesItsOldClientOutsideTheLock (helper-97): a Secret whose content
// changed had its old client closed under the lock every Secret's read takes (a tenant
// whose rediss:// server stops reading, editing its Secrets, held up every other
// tenant's passes: up to 5 s a close). The idle clients' close was moved out of it
// before (take); this one was not.
func TestChangedSecretClosesItsOldClientOutsideTheLock(t *testing.T) {
	a := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "redis"}, Data: map[string][]byte{"url": []byte("redis://127.0.0.1:1")}}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: "redis"}, Data: map[string][]byte{"url": []byte("redis://127.0.0.1:2")}}
	b := newBackends(fake.NewClientBuilder().WithObjects(a, other).Build())
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	old := stuckClose{UniversalClient: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), closing: make(chan struct{}), once: &sync.Once{}, release: release}
	// tenant-a's client, made for the Secret's earlier content (another sum).
	b.clients[types.NamespacedName{Namespace: "tenant-a", Name: "redis"}] = cachedClient{client: old, made: time.Now()}

	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, ns := range []string{"tenant-a", "tenant-b"} {
			c, _, berr := b.client(context.Background(), ns, "redis")
			if berr != nil {
				t.Errorf("%s: %v", ns, berr)
				continue
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	select {
	case <-old.closing:
	case <-time.After(10 * time.Second):
		t.Fatal("the changed Secret's old client was never closed")
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the Secret reads waited for the changed Secret's old client to close")
	}
}
