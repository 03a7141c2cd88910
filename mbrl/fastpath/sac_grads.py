"""A fast path: SAC's update with its gradients written out by hand (``agent.grads=auto`` picks
it on a CPU, where it is measured faster; ``mbrl/agents/sac.py`` defines the losses, and
tests/test_sac.py checks every gradient here against autograd on them).

Autograd records and replays about 800 small operations per update; on a CPU their dispatch
costs about as much as the matmuls themselves. Written out, the update is about 100 operations:
the actor runs once over [obs; next_obs]; the critic's pass on (obs, act) makes its weight
gradients, and its pass on (obs, pi(obs)) only carries the actor's gradient back to the action,
as the actor's loss treats the critic's weights as constants. ReLU's backward reads the layer's
output, so no boolean masks are stored. A change to a loss in ``SAC`` needs no change here:
the fast path is then not used (``SAC.uses_own_losses``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from flows.nn import EnsembleLinear, fp32, full
from mbrl.agents.networks import Actor, TwinQ, tanh_gaussian
from mbrl.fastpath.workspace import Fresh


class SACParts(Protocol):
    """What the hand-written update reads from the agent (``mbrl.agents.sac.SAC``)."""

    actor: Actor
    critic: TwinQ
    critic_target: TwinQ
    log_alpha: Tensor
    target_entropy: float
    gamma: float
    autotune: bool

    def autocast(self) -> AbstractContextManager[Any]: ...


@torch.no_grad()
def joint_grads(
    sac: SACParts, ws: Fresh, *batch: Tensor
) -> tuple[tuple[Tensor, ...], list[Tensor]]:
    """``batch``: obs, act, rew, next_obs, terminated, noise [2, B, act_dim] (as
    ``SAC.losses``). Returns ((q_loss, actor_loss, alpha_loss, alpha, q_mean, entropy),
    gradients of the three losses' sum in the order of ``sac.opt``'s parameters: actor,
    critic, log_alpha)."""
    with sac.autocast():  # (matmuls in the AMP dtype; gradients come out as fp32)
        return _joint_grads(sac, ws, *batch)


def _joint_grads(
    sac: SACParts,
    ws: Fresh,
    obs: Tensor,
    act: Tensor,
    rew: Tensor,
    next_obs: Tensor,
    term: Tensor,
    noise: Tensor,
) -> tuple[tuple[Tensor, ...], list[Tensor]]:
    n, actor = obs.shape[0], sac.actor
    ws.start()
    alpha = sac.log_alpha.detach().exp()
    hs_actor = actor_hidden(actor, torch.cat([obs, next_obs]), ws)
    mean, raw = actor_heads(actor, hs_actor[-1], ws)
    tanh_raw = torch.tanh(raw)
    action, log_prob, std = tanh_gaussian(mean, actor.log_std(tanh_raw), noise.flatten(0, 1))
    pi, logp = action[:n], log_prob[:n]  # the actor's loss; [n:] makes the target
    x_next = torch.cat([next_obs, action[n:]], -1).expand(2, -1, -1)
    q_next = critic_activations(sac.critic_target, x_next, ws)[-1].squeeze(-1).float().amin(0)
    # (Two 256-row critic passes, not one over both halves: less memory, and faster.)
    hs_critic = critic_activations(sac.critic, torch.cat([obs, act], -1).expand(2, -1, -1), ws)
    hs_pi = critic_activations(sac.critic, torch.cat([obs, pi], -1).expand(2, -1, -1), ws)
    # Only true terminations cut the bootstrap; time-limit truncations do not.
    target = rew + sac.gamma * (~term).float() * (q_next - alpha * log_prob[n:])
    q = hs_critic[-1].squeeze(-1).float()
    q_pi, argmin = hs_pi[-1].squeeze(-1).float().min(0)
    error = q - target
    alpha_grad = -(logp + sac.target_entropy).mean()
    out = (
        0.5 * error.square().mean(1).sum(),
        (alpha * logp - q_pi).mean(),
        sac.log_alpha.detach() * alpha_grad,
        alpha,
        q.mean(),
        -logp.mean(),
    )
    critic_grads = _critic_backward(sac.critic.linears, hs_critic, error * (1.0 / n), ws)
    # The actor's loss reaches q_pi through the min over the two critics: to the one that was
    # smaller, as autograd's min does.
    grad_pi = torch.zeros_like(q).scatter_(0, argmin.unsqueeze(0), -1.0 / n)
    grad_pi_act = _critic_input_grad(sac.critic.linears, hs_pi, grad_pi, ws, obs.shape[1]).sum(0)
    # The actor's loss is mean(alpha * logp - q): d loss / d logp = alpha / n on every row.
    grad_head = _tanh_gaussian_backward(
        grad_pi_act, alpha / n, pi, std[:n], noise[0], tanh_raw[:n], actor.half_range
    )
    actor_grads = _actor_backward(actor.linears, hs_actor, grad_head, n, ws)
    alpha_grads = [alpha_grad] if sac.autotune else []
    return out, actor_grads + critic_grads + alpha_grads


def _tanh_gaussian_backward(
    grad_action: Tensor,
    grad_log_prob: Tensor,
    action: Tensor,
    std: Tensor,
    noise: Tensor,
    tanh_raw: Tensor,
    half_range: float,
) -> Tensor:
    """Gradient on the actor's head output (mean, raw log-std) [n, 2 * act_dim] through
    a = tanh(u), u = mean + std * noise, log_std = min + half_range * (tanh(raw) + 1), given
    the gradients on a and on the log-probability (``tanh_gaussian``'s). With the noise fixed,
    d logp / du = 2 tanh(u) (from the squashing term) and d logp / d log_std = -1."""
    grad_u = grad_action * (1.0 - action.square()) + (2.0 * grad_log_prob) * action
    grad_log_std = grad_u * std * noise - grad_log_prob
    grad_raw = grad_log_std * half_range * (1.0 - tanh_raw.square())
    return torch.cat([grad_u, grad_raw], -1)


def _critic_backward(
    layers: Sequence[EnsembleLinear], hs: list[Tensor], grad_q: Tensor, ws: Fresh
) -> list[Tensor]:
    """Weight and bias gradients [2, in, out], [2, 1, out] of the batched critic, given its
    activations ``hs`` and the gradient on its output q [2, N]."""
    grads: list[Tensor] = []
    grad = grad_q.unsqueeze(-1)
    for i in reversed(range(len(layers))):
        with fp32(hs[i]) if i == len(layers) - 1 else contextlib.nullcontext():
            h = full(hs[i]) if i == len(layers) - 1 else hs[i]  # the fp32 head's input
            grads[:0] = [
                ws.bmm(h.transpose(1, 2), grad).float(),
                grad.sum(1, keepdim=True).float(),
            ]
        if i > 0:
            grad = ws.relu_backward(ws.bmm(grad, layers[i].weight.transpose(1, 2)), hs[i])
    return grads


def _critic_input_grad(
    layers: Sequence[EnsembleLinear], hs: list[Tensor], grad_q: Tensor, ws: Fresh, first: int
) -> Tensor:
    """The gradient on the critic's inputs from column ``first`` on [2, N, in - first] (the
    action's), the weights held constant."""
    grad = grad_q.unsqueeze(-1)
    for i in reversed(range(len(layers))):
        w = layers[i].weight if i > 0 else layers[0].weight[:, first:]
        grad = ws.bmm(grad, w.transpose(1, 2))
        if i > 0:
            grad = ws.relu_backward(grad, hs[i])
    return grad


def _actor_backward(
    layers: Sequence[nn.Linear], hs: list[Tensor], grad: Tensor, n: int, ws: Fresh
) -> list[Tensor]:
    """``nn.Linear`` weight and bias gradients from rows [:n] of the actor's activations."""
    grads: list[Tensor] = []
    for i in reversed(range(len(layers))):
        last = i == len(layers) - 1
        with fp32(hs[i]) if last else contextlib.nullcontext():
            h = full(hs[i][:n]) if last else hs[i][:n]  # the fp32 head's input
            grads[:0] = [ws.mm(grad.t(), h).float(), grad.sum(0).float()]
        if i > 0:
            grad = ws.relu_backward(ws.mm(grad, layers[i].weight), hs[i][:n])
    return grads


# --- the forward passes, keeping every layer's output for the backward ----------------------


def actor_hidden(actor: Actor, obs: Tensor, ws: Fresh) -> list[Tensor]:
    """The input and each hidden layer's output: ``actor.net`` without its head, with in-place
    ReLUs and no per-layer module calls (Python overhead is a large share of an update's time
    on a CPU)."""
    hs = [obs]
    for layer in actor.linears[:-1]:
        hs.append(ws.mm(hs[-1], layer.weight.t()).add_(layer.bias).relu_())
    return hs


def actor_heads(actor: Actor, h: Tensor, ws: Fresh) -> tuple[Tensor, Tensor]:
    """Last hidden layer -> (mean, raw log-std) [B, act_dim] each, in fp32 (as ``Actor``)."""
    last = actor.linears[-1]
    with fp32(h):
        # W @ h^T rather than h @ W^T: with 2 * act_dim outputs, faster on a CPU.
        out = ws.mm(last.weight, full(h).t()).add_(last.bias.unsqueeze(1)).t()
    mean, raw = out.chunk(2, dim=-1)
    return mean, raw


def critic_activations(critic: TwinQ, x: Tensor, ws: Fresh) -> list[Tensor]:
    """x [2, N, obs+act] -> [x, each hidden layer's output, q [2, N, 1]] (``critic.net``'s
    computation, the Q head in fp32)."""
    hs = [x]
    layers = critic.linears
    for i, layer in enumerate(layers):
        w: Tensor = layer.weight
        b: Tensor = layer.bias
        if i == len(layers) - 1:
            with fp32(x):
                hs.append(ws.bmm(full(x), w).add_(b))
            break
        # bmm then the bias in place (not baddbmm, which first copies the bias into its
        # output): compiled, the bias and the ReLU become one pass over the bmm's result.
        x = torch.relu_(ws.bmm(x, w).add_(b))
        hs.append(x)
    return hs
