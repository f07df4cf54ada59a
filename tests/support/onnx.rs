//! Small ONNX models written by the tests (onnx-rs's encoder): attributes, tensors and
//! nodes as PyTorch's exporter writes them, and [`GraphWriter`], a graph built node by node
//! with generated tensor names (the transformer models of `onnx_transformers`).

use onnx_rs::ast::{
    Attribute, AttributeType, DataType, Dimension, Graph, Model, Node, OpType, OperatorSetId,
    TensorProto, TensorShape, TensorShapeDimension, TensorTypeProto, TypeProto, TypeValue,
    ValueInfo,
};
use std::path::Path;

pub fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

pub fn ints(name: &'static str, v: &[i64]) -> Attribute<'static> {
    Attribute {
        name,
        r#type: AttributeType::Ints,
        ints: v.to_vec(),
        ..Default::default()
    }
}

pub fn int(name: &'static str, v: i64) -> Attribute<'static> {
    Attribute {
        name,
        r#type: AttributeType::Int,
        i: v,
        ..Default::default()
    }
}

pub fn float(name: &'static str, v: f32) -> Attribute<'static> {
    Attribute {
        name,
        r#type: AttributeType::Float,
        f: v,
        ..Default::default()
    }
}

/// A tensor's type and dims (a dim of 0 or less is the symbolic batch `N`).
pub fn typed_info(name: &'static str, elem_type: DataType, dims: &[i64]) -> ValueInfo<'static> {
    let dim = dims
        .iter()
        .map(|&d| TensorShapeDimension {
            value: if d > 0 {
                Dimension::Value(d)
            } else {
                Dimension::Param("N")
            },
            denotation: "",
        })
        .collect();
    ValueInfo {
        name,
        r#type: Some(TypeProto {
            value: Some(TypeValue::Tensor(TensorTypeProto {
                elem_type,
                shape: Some(TensorShape { dim }),
            })),
            denotation: "",
        }),
        ..Default::default()
    }
}

/// A float tensor's type and dims.
pub fn tensor_info(name: &'static str, dims: &[i64]) -> ValueInfo<'static> {
    typed_info(name, DataType::Float, dims)
}

pub fn node(
    name: &'static str,
    op_type: OpType<'static>,
    input: &[&'static str],
    output: &'static str,
    attribute: Vec<Attribute<'static>>,
) -> Node<'static> {
    Node {
        name,
        op_type,
        input: input.to_vec(),
        output: vec![output],
        attribute,
        ..Default::default()
    }
}

pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A graph written node by node: each node named `{scope}/{Op}_{k}`, its output after it.
#[derive(Default)]
pub struct GraphWriter {
    pub nodes: Vec<Node<'static>>,
    pub inits: Vec<TensorProto<'static>>,
    /// The module path of the nodes written next (`/h.0/attn`).
    pub scope: String,
}

impl GraphWriter {
    /// A learned float tensor, dims only (the importer reads shapes).
    pub fn weight(&mut self, name: &str, dims: &[i64]) -> &'static str {
        let name = leak(name.to_string());
        self.inits.push(TensorProto::from_raw(
            name,
            dims.to_vec(),
            DataType::Float,
            &[],
        ));
        name
    }

    /// A float initializer with its values (a mask buffer).
    pub fn floats(&mut self, name: &str, dims: &[i64], data: Vec<f32>) -> &'static str {
        let name = leak(name.to_string());
        self.inits
            .push(TensorProto::from_f32(name, dims.to_vec(), data));
        name
    }

    /// An int64 `Constant` node.
    pub fn i64s(&mut self, dims: &[i64], data: &[i64]) -> &'static str {
        let t = TensorProto::from_i64("", dims.to_vec(), data.to_vec());
        self.constant(t)
    }

    /// A float scalar `Constant` node.
    pub fn scalar(&mut self, v: f32) -> &'static str {
        self.constant(TensorProto::from_f32("", vec![], vec![v]))
    }

    fn constant(&mut self, t: TensorProto<'static>) -> &'static str {
        let attr = Attribute {
            name: "value",
            r#type: AttributeType::Tensor,
            t: Some(t),
            ..Default::default()
        };
        self.op(OpType::Constant, &[], vec![attr])
    }

    /// A node of one output; returns the output's name.
    pub fn op(
        &mut self,
        op_type: OpType<'static>,
        input: &[&'static str],
        attribute: Vec<Attribute<'static>>,
    ) -> &'static str {
        self.op_n(op_type, input, attribute, 1)[0]
    }

    /// A node of `n` outputs.
    pub fn op_n(
        &mut self,
        op_type: OpType<'static>,
        input: &[&'static str],
        attribute: Vec<Attribute<'static>>,
        n: usize,
    ) -> Vec<&'static str> {
        let k = self.nodes.len();
        let name = leak(format!("{}/{}_{k}", self.scope, op_type.as_str()));
        let output: Vec<&'static str> = (0..n).map(|i| leak(format!("{name}:{i}"))).collect();
        self.nodes.push(Node {
            name,
            op_type,
            input: input.to_vec(),
            output: output.clone(),
            attribute,
            ..Default::default()
        });
        output
    }

    /// The model of the graph: `input` in, `output` out, at `opset`.
    pub fn model(
        self,
        input: ValueInfo<'static>,
        output: ValueInfo<'static>,
        opset: i64,
    ) -> Model<'static> {
        Model {
            ir_version: 8,
            opset_import: vec![OperatorSetId {
                domain: "",
                version: opset,
            }],
            producer_name: "pipeopt tests",
            graph: Some(Graph {
                name: "transformer",
                node: self.nodes,
                initializer: self.inits,
                input: vec![input],
                output: vec![output],
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

/// `pipeopt import onnx FILE --batch BATCH --granularity GRANULARITY --json --out OUT`.
pub fn import_onnx(
    file: &Path,
    batch: usize,
    granularity: &str,
    out: &Path,
) -> std::process::Output {
    crate::support::pipeopt()
        .args(["import", "onnx"])
        .arg(file)
        .args(["--batch", &batch.to_string(), "--granularity", granularity])
        .args(["--json", "--out"])
        .arg(out)
        .output()
        .unwrap()
}
