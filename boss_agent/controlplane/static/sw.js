// The page's service worker: it makes the page installable on a home screen and shows
// the notifications the page asks for ("an approval waits"); a tap brings the page back.
// It caches nothing: every view is live from the control plane.
"use strict";

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));
self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  event.waitUntil(self.clients.matchAll({ type: "window", includeUncontrolled: true }).then((windows) =>
    windows.length ? windows[0].focus() : self.clients.openWindow("/")));
});
