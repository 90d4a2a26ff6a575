// The page's calls to the control plane: the session, JSON requests and the event stream.
// The session is kept in this origin's storage and sent in a header by this script only:
// a cookie would be sent by the browser by itself, to every port of 127.0.0.1, so it is
// never enough here (boss_agent/controlplane/security.py).

export const SESSION_KEY = "boss-session";

// The printed page URL ends in #session=…: keep it, and take it out of the address bar and history.
export function takeSessionFromAddress() {
  const params = new URLSearchParams(location.hash.slice(1));
  if (!params.has("session")) return;
  localStorage.setItem(SESSION_KEY, params.get("session"));
  history.replaceState(null, "", location.pathname);
}

function authHeaders() {
  const session = localStorage.getItem(SESSION_KEY);
  return session ? { Authorization: `Bearer ${session}` } : {};
}

// One JSON request; its answer, or an Error with the server's message.
export async function call(method, path, body) {
  const headers = authHeaders();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error((data.error && data.error.message) || `HTTP ${response.status}`);
  return data;
}

// Server-sent events over fetch (EventSource cannot send a header): calls
// handlers[event](data) per frame; resolves with the HTTP status when the stream ends.
export async function readEvents(path, handlers) {
  const response = await fetch(path, { headers: authHeaders(), credentials: "same-origin", cache: "no-store" });
  if (!response.ok || !response.body) return response.status;
  handlers.open();
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return response.status;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let kind = "message";
      let data = "";
      for (const line of frame.split("\n")) {
        if (line.startsWith("event: ")) kind = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data && handlers[kind]) handlers[kind](JSON.parse(data));
    }
  }
}
