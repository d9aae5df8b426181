#!/usr/bin/env python3
"""bench_tf.py: the bench.lua workloads in TensorFlow 2, one thread: eager and tf.function.

    python3 bench_tf.py [--modes eager,function] SAMPLES [W1 W2 ...]
    python3 bench_tf.py --serve                 (what `tapedeck bench --peers` runs)

The command line, the output ("W2 eager <min µs> <median µs>" lines after "tensorflow <version>",
"keras <version>" and "onednn <on|off>") and the served protocol are peer_serve.py's. Each
workload is written as a TensorFlow user writes it, with the shapes, ops and update of bench.lua's:
a step computes the loss under tf.GradientTape, takes tape.gradient of the variables and applies
the update (assign_sub, or a Keras optimizer's apply_gradients); a forward-only workload (W5,
W10) runs without a tape. Modes:
  eager     the step as a Python function, op by op
  function  the same step decorated with tf.function (the whole step: forward, gradient and
            update in one graph, as TensorFlow's guide writes a training step); it is traced in
            the warm-up, so the tracing is not timed (W10A times it: the lecture slide)
One thread: tf.config.threading's intra- and inter-op pools of one thread each, set before any op.
W9 (the long unrolled loops) has no twin here. Adding a workload = one function below and one
entry in WORKLOADS.
"""
import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")   # before the import: TensorFlow's C++ log lines

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from peer_serve import ColdStep, Framework, Step, Unsupported, main  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.random.set_seed(0)
keras = tf.keras


# Each workload returns (step, options): step() runs one iteration eagerly; the function mode
# runs tf.function(step). options: warmup, calls (per sample), cold (time the first 10 calls of
# a new tf.function instead: ColdStep), not_static (why there is no tf.function mode).
def w1():
    a, b = tf.Variable(15.0), tf.Variable(20.0)

    def step():
        with tf.GradientTape() as tape:
            c = a * b
        return tape.gradient(c, [a, b])
    return step, {}


def rnn_cell_variables():
    return tf.Variable(tf.random.normal((20, 20))), tf.Variable(tf.random.normal((20, 10)))


def w2():
    W_h, W_x = rnn_cell_variables()
    x, prev_h = tf.random.normal((1, 10)), tf.random.normal((1, 20))

    def step():
        with tf.GradientTape() as tape:
            next_h = tf.tanh(tf.matmul(W_h, prev_h, transpose_b=True) + tf.matmul(W_x, x, transpose_b=True))
            loss = tf.reduce_sum(next_h)
        return tape.gradient(loss, [W_h, W_x])
    return step, {}


def w3():
    """The W2 cell unrolled 50 steps, h (20x1) fed back; tf.function unrolls the Python loop."""
    W_h, W_x = rnn_cell_variables()
    xs, h0 = tf.random.normal((50, 10, 1)), tf.random.normal((20, 1))

    def step():
        with tf.GradientTape() as tape:
            h = h0
            for t in range(50):
                h = tf.tanh(tf.matmul(W_h, h) + tf.matmul(W_x, xs[t]))
            loss = tf.reduce_sum(h)
        return tape.gradient(loss, [W_h, W_x])
    return step, {}


def w4():
    """The lecture's two-layer net, one training step: relu(x w1) w2, sum of squares, SGD (lr 1e-6)."""
    x, y = tf.random.normal((64, 1000)), tf.random.normal((64, 10))
    w1, w2 = tf.Variable(tf.random.normal((1000, 100))), tf.Variable(tf.random.normal((100, 10)))

    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum((tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2) - y) ** 2)
        grad_w1, grad_w2 = tape.gradient(loss, [w1, w2])
        w1.assign_sub(1e-6 * grad_w1)
        w2.assign_sub(1e-6 * grad_w2)
    return step, {}


def w5():
    """Dense forward + MSE, forward only (no tape, as TensorFlow runs a forward pass)."""
    x, y = tf.random.normal((64, 1000)), tf.random.normal((64, 1000))
    W1, b1 = tf.Variable(tf.random.normal((1000, 100)) * 0.03), tf.Variable(tf.zeros(100))
    W2, b2 = tf.Variable(tf.random.normal((100, 1000)) * 0.1), tf.Variable(tf.zeros(1000))

    def step():
        pred = tf.matmul(tf.nn.relu(tf.matmul(x, W1) + b1), W2) + b2
        return tf.reduce_mean((pred - y) ** 2)
    return step, {}


def w6():
    """The small CNN, forward + backward, no update. Channels last (NHWC): TensorFlow's CPU
    convolutions and pooling take no other layout; the shapes are bench.lua's, transposed."""
    x = tf.random.normal((8, 28, 28, 1))
    labels = tf.range(8)
    conv_w, conv_b = tf.Variable(tf.random.normal((3, 3, 1, 8)) * 0.3), tf.Variable(tf.zeros(8))
    fc_w, fc_b = tf.Variable(tf.random.normal((1568, 10)) * 0.02), tf.Variable(tf.zeros(10))
    variables = [conv_w, conv_b, fc_w, fc_b]

    def step():
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.nn.conv2d(x, conv_w, strides=1, padding="SAME") + conv_b)
            h = tf.reshape(tf.nn.max_pool2d(h, 2, 2, "VALID"), (8, 1568))
            logits = tf.matmul(h, fc_w) + fc_b
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        return tape.gradient(loss, variables)
    return step, {}


def keras_train_step(model, optimizer, x, y, max_norm=None):
    """A Keras training step as TensorFlow's guide writes one: loss under the tape, gradients,
    optionally clipped to a global norm, then the optimizer's apply_gradients."""
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model(x)   # make the variables before the first step (and before tf.function traces it)
    optimizer.build(model.trainable_variables)

    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        if max_norm is not None:
            grads, _ = tf.clip_by_global_norm(grads, max_norm)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return step


def w7():
    """char_lstm.lua's training step: Embedding(71, 32), LSTM(128) over 16 sequences of 32
    characters, Dense(71), cross-entropy, gradients clipped to a global norm of 1.0, Adam (lr
    0.01, PyTorch's epsilon 1e-8)."""
    model = keras.Sequential([keras.layers.Embedding(71, 32), keras.layers.LSTM(128, return_sequences=True),
                              keras.layers.Dense(71)])
    x = tf.random.uniform((16, 32), 0, 71, dtype=tf.int32)
    y = tf.random.uniform((16, 32), 0, 71, dtype=tf.int32)
    return keras_train_step(model, keras.optimizers.Adam(0.01, epsilon=1e-8), x, y, max_norm=1.0), {}


class CausalSelfAttention(keras.layers.Layer):
    """nanoGPT's attention: one Dense for q, k and v, heads, causal mask, softmax, output Dense."""

    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn, self.c_proj, self.n_head = keras.layers.Dense(3 * n_embd), keras.layers.Dense(n_embd), n_head

    def call(self, x):
        B, T, C = x.shape
        heads = lambda t: tf.transpose(tf.reshape(t, (B, T, self.n_head, C // self.n_head)), (0, 2, 1, 3))
        q, k, v = (heads(t) for t in tf.split(self.c_attn(x), 3, axis=2))
        att = tf.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(C // self.n_head))
        causal = tf.linalg.band_part(tf.ones((T, T)), -1, 0)   # 1 on and below the diagonal
        att = tf.nn.softmax(tf.where(causal == 0, float("-inf"), att), axis=-1)
        y = tf.reshape(tf.transpose(tf.matmul(att, v), (0, 2, 1, 3)), (B, T, C))
        return self.c_proj(y)


class Block(keras.layers.Layer):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1, self.ln_2 = keras.layers.LayerNormalization(epsilon=1e-5), keras.layers.LayerNormalization(epsilon=1e-5)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.mlp = keras.Sequential([keras.layers.Dense(4 * n_embd, activation="gelu"), keras.layers.Dense(n_embd)])

    def call(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(keras.Model):
    """nanoGPT's model.py in Keras, dropout 0: token and position embeddings, blocks, final layer
    norm, and the output layer tied to the token embedding (logits = x wteᵀ)."""

    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd):
        super().__init__()
        self.wte, self.wpe = keras.layers.Embedding(vocab_size, n_embd), keras.layers.Embedding(block_size, n_embd)
        self.blocks = [Block(n_embd, n_head) for _ in range(n_layer)]
        self.ln_f = keras.layers.LayerNormalization(epsilon=1e-5)

    def call(self, idx):
        x = self.wte(idx) + self.wpe(tf.range(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return tf.matmul(self.ln_f(x), self.wte.embeddings, transpose_b=True)


def w8():
    """tiny_gpt.lua's training step: batch 16 x 32 tokens, vocabulary 65, 2 blocks, 4 heads, n_embd
    32; cross-entropy; AdamW (lr 1e-4, betas 0.9 and 0.99, weight decay 0.1 on the matrices only,
    as nanoGPT's configure_optimizers groups them)."""
    model = GPT(vocab_size=65, block_size=32, n_layer=2, n_head=4, n_embd=32)
    x = tf.random.uniform((16, 32), 0, 65, dtype=tf.int32)
    y = tf.random.uniform((16, 32), 0, 65, dtype=tf.int32)
    model(x)
    optimizer = keras.optimizers.AdamW(1e-4, weight_decay=0.1, beta_1=0.9, beta_2=0.99, epsilon=1e-8)
    optimizer.exclude_from_weight_decay(var_list=[v for v in model.trainable_variables if len(v.shape) < 2])
    return keras_train_step(model, optimizer, x, y), {}


def w10(cold):
    """The lecture's tf.function slide, its code as it stands (an Input layer instead of the
    input_shape argument Keras 3 warns about): N, D, H = 64, 1000, 100; Dense(H, relu), Dense(D);
    the forward pass and MeanSquaredError, timed as timeit(number=10) times it. W10A (cold): each
    sample makes a new tf.function and times its first 10 calls, the tracing included, as the
    slide's static run did; W10B: 10 calls a sample, after the warm-up."""
    N, D, H = 64, 1000, 100
    x = tf.convert_to_tensor(np.random.randn(N, D), np.float32)
    y = tf.convert_to_tensor(np.random.randn(N, D), np.float32)
    model = keras.Sequential()
    model.add(keras.Input(shape=(D,)))
    model.add(keras.layers.Dense(H, activation=tf.nn.relu))
    model.add(keras.layers.Dense(D))

    def model_dynamic():
        y_pred = model(x)
        loss = tf.losses.MeanSquaredError()(y_pred, y)
        return y_pred, loss
    return model_dynamic, {"cold": cold, "calls": 10}


WORKLOADS = {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "W6": w6, "W7": w7, "W8": w8,
             "W10A": lambda: w10(cold=True), "W10B": lambda: w10(cold=False)}


class TensorFlowFramework(Framework):
    """TensorFlow for peer_serve.py: the modes eager and function, on the CPU."""

    modes = ("eager", "function")

    def __init__(self, device):
        if device != "cpu":
            raise SystemExit("bench_tf.py runs on the CPU only")

    def versions(self):
        onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") != "0"
        return [f"tensorflow {tf.__version__}", f"keras {keras.__version__}", f"onednn {'on' if onednn else 'off'}"]

    def setup(self, name, modes):
        if name not in WORKLOADS:
            raise Unsupported(f"no TensorFlow twin of {name}")
        step, options = WORKLOADS[name]()
        return {mode: self.mode_step(mode, step, options) for mode in modes}

    def mode_step(self, mode, step, options):
        """The Step (or ColdStep) of one mode, or why there is none."""
        if mode == "eager":
            make = lambda: step
        elif mode == "function":
            make = lambda: tf.function(step)
        else:
            return f"no mode {mode} (eager, function)"
        if options.get("cold"):
            return ColdStep(make)
        return Step(make(), options.get("warmup", 20), options.get("calls"))


if __name__ == "__main__":
    main(TensorFlowFramework, list(WORKLOADS))
