"""ONNX's operator names: so that a name of ONNX's is never answered with the DirectML names it is spelt like
(`Concat` once got "cast?", `ConvTranspose` "constant_pow?").

Names only: what each means in DirectML's terms is the suite's ONNX table (dmlcli/suite/onnx/table.py, which
`dmlcli test` and `dmlcli onnx` map with), which dmlcli/onnx_spellings.py reads for the command line and the API,
above this layer. The list is onnx.defs' every operator of every domain and version (onnx 1.23.2;
tests/test_onnx_spellings.py holds it to onnx.defs where onnx is installed, and to the table's names).
"""

from __future__ import annotations

ONNX_OPERATORS = frozenset("""
Abs Acos Acosh Adagrad Adam Add AffineGrid And ArgMax ArgMin ArrayFeatureExtractor Asin Asinh Atan Atanh
Attention AveragePool BatchNormalization Bernoulli Binarizer BitCast BitShift BitwiseAnd BitwiseNot BitwiseOr
BitwiseXor BlackmanWindow Cast CastLike CastMap CategoryMapper CausalConvWithState Ceil Celu CenterCropPad Clip
Col2Im Compress Concat ConcatFromSequence Constant ConstantOfShape Conv ConvInteger ConvTranspose Cos Cosh
CumProd CumSum DFT DeformConv DepthToSpace DequantizeLinear Det DictVectorizer Div Dropout DynamicQuantizeLinear
Einsum Elu Equal Erf Exp Expand EyeLike FeatureVectorizer Flatten FlexAttention Floor GRU Gather GatherElements
GatherND Gelu Gemm GlobalAveragePool GlobalLpPool GlobalMaxPool Gradient Greater GreaterOrEqual GridSample
GroupNormalization HammingWindow HannWindow HardSigmoid HardSwish Hardmax Identity If ImageDecoder Imputer
InstanceNormalization IsInf IsNaN LRN LSTM LabelEncoder LayerNormalization LeakyRelu Less LessOrEqual
LinearAttention LinearClassifier LinearRegressor Log LogSoftmax Loop LpNormalization LpPool MatMul MatMulInteger
Max MaxPool MaxRoiPool MaxUnpool Mean MeanVarianceNormalization MelWeightMatrix Min Mish Mod Momentum Mul
Multinomial Neg NegativeLogLikelihoodLoss NonMaxSuppression NonZero Normalizer Not OneHot OneHotEncoder Optional
OptionalGetElement OptionalHasElement Or PRelu Pad Pow QLinearConv QLinearMatMul QuantizeLinear RMSNormalization
RNN RandomNormal RandomNormalLike RandomUniform RandomUniformLike Range Reciprocal ReduceL1 ReduceL2
ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare RegexFullMatch
Relu Reshape Resize ReverseSequence RoiAlign RotaryEmbedding Round STFT SVMClassifier SVMRegressor Scaler Scan
Scatter ScatterElements ScatterND Selu SequenceAt SequenceConstruct SequenceEmpty SequenceErase SequenceInsert
SequenceLength SequenceMap Shape Shrink Sigmoid Sign Sin Sinh Size Slice Softmax SoftmaxCrossEntropyLoss
Softplus Softsign SpaceToDepth Split SplitToSequence Sqrt Squeeze StringConcat StringNormalizer StringSplit Sub
Sum SwiGLU Swish Tan Tanh TensorScatter TfIdfVectorizer ThresholdedRelu Tile TopK Transpose TreeEnsemble
TreeEnsembleClassifier TreeEnsembleRegressor Trilu Unique Unsqueeze Upsample Where Xor ZipMap
""".split())

# ONNX's names in upper case without separators (no two of ONNX's names differ by case alone), as a normalised key
# is compared with them.
_BY_KEY = {name.upper(): name for name in ONNX_OPERATORS}


def onnx_name(key: str) -> str | None:
    """The ONNX operator a normalised key (upper case, separators as _) spells in any case, with or without
    separators (REDUCEMEAN, REDUCE_MEAN: ReduceMean), or None."""
    return _BY_KEY.get(key.replace("_", ""))
