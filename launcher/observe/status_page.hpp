#pragma once
/// The status endpoint's page (GET /): one self-contained HTML document, its style and script
/// inline, no external asset (the machines of many users reach no CDN). Every second it fetches
/// api/status and renders the per-rank table (rank, node, pid, state, step, samples/s, CPU %, RSS,
/// GPU, output age, the worker's text; the GPU column only when a rank has GPUs, its cell as the
/// console's with every GPU in full as its tooltip; stragglers and GPU stragglers marked), under it
/// each unhealthy GPU and each node's gpu_note, the restarts and hangs of each node and the event timeline;
/// a click on "Capture stacks" (or opening the page at #stacks) fetches api/stacks and shows the
/// digest and every rank's frames. URLs are
/// relative, and a `token` query parameter of the page's own URL is passed on to them, so the page
/// works behind a path prefix and on an endpoint that requires the store token.
///
/// Everything a worker or a user controls (text, host names, frames) is put in the page as text
/// (textContent), never as markup.
#include <string_view>

namespace ddprun::launcher {

/// The page, UTF-8.
std::string_view status_page_html();

}  // namespace ddprun::launcher
