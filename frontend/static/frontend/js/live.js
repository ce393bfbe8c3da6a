// The /ws/live/ stream: subscribe to scopes (and, with `state`, to the deployment's state of one
// scope), reconnect with backoff, pause while the tab is hidden, and flag "stale" when no point
// has arrived for STALE_MS (state messages keep coming on an idle deployment: they prove the
// socket, not the data).
const STALE_MS = 15000;
const MAX_BACKOFF_MS = 30000;

export function openLive({ scopes, state, onPoints, onAlert, onState, onResume, statusEl }) {
  let socket = null;
  let backoff = 1000;
  let lastMessage = Date.now();
  let retry = null;
  const setStatus = (state) => {
    if (statusEl) { statusEl.dataset.state = state; statusEl.textContent = state; }
  };
  const url = () => {
    const proto = location.protocol === "https:" ? "wss" : "ws";
    const parts = scopes.map((s) => "scope=" + encodeURIComponent(s));
    if (state) parts.push("state=" + encodeURIComponent(state));
    const query = parts.join("&");
    return `${proto}://${location.host}/ws/live/?${query}`;
  };
  const connect = () => {
    if (document.hidden || socket) return;
    socket = new WebSocket(url());
    socket.onopen = () => { backoff = 1000; lastMessage = Date.now(); setStatus("live"); };
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.event === "state") { if (onState) onState(message); return; }
      lastMessage = Date.now();
      setStatus("live");
      if (message.event === "points") onPoints(message);
      else if (message.event === "alert" && onAlert) onAlert(message.alert);
    };
    socket.onclose = () => {
      socket = null;
      if (document.hidden) { setStatus("paused"); return; }
      setStatus("offline");
      const wait = backoff * (0.75 + Math.random() / 2);
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
      retry = setTimeout(connect, wait);
    };
  };
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      clearTimeout(retry);
      if (socket) socket.close();
      setStatus("paused");
    } else {
      if (onResume) onResume();  // fill the gap from the REST summary
      connect();
    }
  });
  setInterval(() => {
    if (socket && socket.readyState === WebSocket.OPEN && Date.now() - lastMessage > STALE_MS) {
      setStatus("stale");
    }
  }, 1000);
  connect();
}
