// Behaviour of the fixture site: a form that shows a short-lived toast, and a handler that throws.
function signup(event) {
  event.preventDefault();
  const name = document.getElementById("name").value || "friend";
  document.getElementById("signup-result").textContent = "Signed up as " + name + " (" + document.getElementById("plan").value + ")";
  const toast = document.createElement("div");
  toast.className = "toast";
  toast.setAttribute("role", "status");
  toast.textContent = "Thanks, " + name + "! You are signed up.";
  document.body.appendChild(toast);
  setTimeout(() => toast.remove(), 400);
  return false;
}

function brokenHandler() {
  throw new Error("broken button handler");
}

function loadResults() {
  // The server answers /slow after a delay: the change report must wait for the fetch, not just for quiet.
  fetch("/slow?ms=700").then((r) => r.json()).then((data) => {
    document.getElementById("results").textContent = "Loaded " + data.count + " results";
  });
}
