// kernel_run.cpp: kernel_run, the one way a kernel is called (backend.h), and its copy rules: the
// contiguous copies a kernel that reads contiguous values gets for strided inputs and aliasing
// in-place writes, and the emulated GPU's deferred calls while it captures.
#include "backend.h"

#include <functional>
#include <vector>

#include "device_emulated.h"

namespace td {

// Whether a kernel that reads contiguous values needs copies made for this call: an input that is
// a strided view; an in-place op writing through a strided view (it runs on a copy, written back);
// an in-place op's other input that shares the written storage (it is read from a copy, so the
// writes cannot change what is still to be read).
static bool needs_contiguous_copies(const OpInfo& info, const KernelCall& c) {
    if (info.flags & (OPF_VIEW | OPF_STRIDED)) return false;
    for (int i = 0; i < c.n_inputs; ++i)
        if (c.inputs[i]->strided()) return true;
    if (!(info.flags & OPF_INPLACE)) return false;
    if (c.outputs[0]->strided()) return true;
    for (int i = 1; i < c.n_inputs; ++i)
        if (c.inputs[i]->storage.get() == c.outputs[0]->storage.get()) return true;
    return false;
}

static void kernel_run_on_copies(const OpInfo& info, KernelFn kernel, const KernelCall& c) {
    bool inplace = info.flags & OPF_INPLACE;
    constexpr int INLINE = 4;   // most ops have few inputs: no heap for them (this runs per op on views)
    Value copies_inline[INLINE];
    const Value* inputs_inline[INLINE];
    std::vector<Value> copies_heap(c.n_inputs > INLINE ? c.n_inputs : 0);
    std::vector<const Value*> inputs_heap(c.n_inputs > INLINE ? c.n_inputs : 0);
    Value* copies = c.n_inputs > INLINE ? copies_heap.data() : copies_inline;
    const Value** inputs = c.n_inputs > INLINE ? inputs_heap.data() : inputs_inline;
    for (int i = 0; i < c.n_inputs; ++i) {
        const Value& v = *c.inputs[i];
        bool aliases = inplace && i > 0 && v.storage.get() == c.outputs[0]->storage.get();
        inputs[i] = &v;
        if (v.strided() || aliases || (inplace && i == 0 && c.outputs[0]->strided())) {
            copies[i] = value_new(v.shape, v.dtype, v.device());
            value_copy_elements(copies[i], v);
            inputs[i] = &copies[i];
        }
    }
    Value* outputs[MAX_OUTPUTS];
    for (int i = 0; i < c.n_outputs; ++i) outputs[i] = c.outputs[i];
    bool write_back = inplace && c.outputs[0]->strided();
    if (write_back) outputs[0] = &copies[0];   // input 0 is the written tensor: run on its copy
    KernelCall call{inputs, c.n_inputs, outputs, c.n_outputs, c.attrs};
    kernel(call);
    if (write_back) value_copy_elements(*c.outputs[0], copies[0]);
}

// A kernel call kept for later (the emulated GPU's capture, device_emulated.h): the values are
// copied (they share the storages, as a CUDA graph keeps the pointers), so are the attributes.
static std::function<void()> deferred_kernel_call(OpId op, KernelFn kernel, const KernelCall& call) {
    std::vector<Value> inputs, outputs;
    for (int i = 0; i < call.n_inputs; ++i) inputs.push_back(*call.inputs[i]);
    for (int i = 0; i < call.n_outputs; ++i) outputs.push_back(*call.outputs[i]);
    OpAttrs attrs = call.attrs;
    attrs.init_values = nullptr;
    return [op, kernel, inputs, outputs, attrs]() mutable {
        std::vector<const Value*> in;
        std::vector<Value*> out;
        for (const Value& v : inputs) in.push_back(&v);
        for (Value& v : outputs) out.push_back(&v);
        KernelCall again{in.data(), static_cast<int>(in.size()), out.data(), static_cast<int>(out.size()), attrs};
        EmulatedKernelScope running;
        const OpInfo& info = op_table[op];
        if (needs_contiguous_copies(info, again)) kernel_run_on_copies(info, kernel, again);
        else kernel(again);
    };
}

// The device whose kernel runs a call: its outputs' (a copy between devices, `to_device`, runs on
// the device it copies to), else its inputs'.
static Device call_device(const KernelCall& call) {
    if (call.n_outputs > 0 && call.outputs[0]->storage) return call.outputs[0]->device();
    return call.n_inputs > 0 ? call.inputs[0]->device() : DEVICE_CPU;
}

void kernel_run(OpId op, const KernelCall& call) {
    const OpInfo& info = op_table[op];
    bool any_element = call.n_outputs == 0;
    for (int i = 0; i < call.n_outputs && !any_element; ++i) any_element = call.outputs[i]->numel() > 0;
    if (!any_element && !(info.flags & OPF_VIEW)) return;
    Device device = call_device(call);
    KernelFn kernel = kernel_for(op, device);
    if (device != DEVICE_CPU && device_emulated()) {   // the CPU kernel reads the emulated device's memory
        if (emulated_capturing() && !(info.flags & OPF_VIEW)) {
            emulated_capture_add(deferred_kernel_call(op, kernel, call));
            return;
        }
        EmulatedKernelScope running;
        if (needs_contiguous_copies(info, call)) kernel_run_on_copies(info, kernel, call);
        else kernel(call);
        return;
    }
    if (needs_contiguous_copies(info, call)) kernel_run_on_copies(info, kernel, call);
    else kernel(call);
}

}  // namespace td
